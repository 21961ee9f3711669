"""Issue 4's PyTorch cases, a script each (see common.py). A regular package, so a
`training` package elsewhere on the path cannot stand in for it."""
