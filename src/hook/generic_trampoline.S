/* Generic "flush, then forward" trampolines for driver functions graft sees
 * but cannot decode (an older or newer ABI of a table function, or an unknown
 * stream-ordered function). Trampoline i saves every argument register, calls
 * graft_generic_enter(i) — which issues everything graft holds — and jumps to
 * the real function it returns with the caller's registers and stack intact. */
#if defined(__x86_64__)
  .text
  .macro GRAFT_GENERIC_TRAMPOLINE n
  .globl graft_generic_trampoline_\n
  .hidden graft_generic_trampoline_\n
  .type graft_generic_trampoline_\n, @function
graft_generic_trampoline_\n:
  .cfi_startproc
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  push %rdx
  .cfi_adjust_cfa_offset 8
  push %rcx
  .cfi_adjust_cfa_offset 8
  push %r8
  .cfi_adjust_cfa_offset 8
  push %r9
  .cfi_adjust_cfa_offset 8
  push %rax
  .cfi_adjust_cfa_offset 8
  sub $128, %rsp
  .cfi_adjust_cfa_offset 128
  movdqu %xmm0, 0(%rsp)
  movdqu %xmm1, 16(%rsp)
  movdqu %xmm2, 32(%rsp)
  movdqu %xmm3, 48(%rsp)
  movdqu %xmm4, 64(%rsp)
  movdqu %xmm5, 80(%rsp)
  movdqu %xmm6, 96(%rsp)
  movdqu %xmm7, 112(%rsp)
  mov $\n, %edi
  call graft_generic_enter
  mov %rax, %r11
  movdqu 0(%rsp), %xmm0
  movdqu 16(%rsp), %xmm1
  movdqu 32(%rsp), %xmm2
  movdqu 48(%rsp), %xmm3
  movdqu 64(%rsp), %xmm4
  movdqu 80(%rsp), %xmm5
  movdqu 96(%rsp), %xmm6
  movdqu 112(%rsp), %xmm7
  add $128, %rsp
  .cfi_adjust_cfa_offset -128
  pop %rax
  .cfi_adjust_cfa_offset -8
  pop %r9
  .cfi_adjust_cfa_offset -8
  pop %r8
  .cfi_adjust_cfa_offset -8
  pop %rcx
  .cfi_adjust_cfa_offset -8
  pop %rdx
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  jmp *%r11
  .cfi_endproc
  .size graft_generic_trampoline_\n, .-graft_generic_trampoline_\n
  .endm

  .irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63
  GRAFT_GENERIC_TRAMPOLINE \i
  .endr

  .section .data.rel.ro,"aw"
  .globl graft_generic_trampolines
  .hidden graft_generic_trampolines
  .p2align 3
graft_generic_trampolines:
  .irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63
  .quad graft_generic_trampoline_\i
  .endr
  .globl graft_generic_trampoline_count
  .hidden graft_generic_trampoline_count
graft_generic_trampoline_count:
  .quad 64
#endif
  .section .note.GNU-stack,"",@progbits
