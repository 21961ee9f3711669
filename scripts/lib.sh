# Shared by the scripts: where the checkout and the build are, and how to get
# the build dependencies. Sourced, not run.
GRAFT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GRAFT_BUILD=${GRAFT_BUILD_DIR:-$GRAFT_ROOT/build}
# Absolute, so LD_PRELOAD=$LIBGRAFT still names the library in a child that
# changed directory (GRAFT_BUILD_DIR=build scripts/graft bash -c 'cd /tmp; ...').
case "$GRAFT_BUILD" in /*) ;; *) GRAFT_BUILD=$PWD/$GRAFT_BUILD ;; esac
LIBGRAFT=$GRAFT_BUILD/src/libgraft.so

# Installs what the build needs, from Debian packages, if something is missing.
graft_install_deps() {
  local need=()
  command -v meson >/dev/null || need+=(meson)
  command -v ninja >/dev/null || need+=(ninja-build)
  command -v g++ >/dev/null || need+=(g++)
  command -v python3 >/dev/null || need+=(python3)
  command -v readelf >/dev/null || need+=(binutils)
  [ -f /usr/include/spdlog/spdlog.h ] || need+=(libspdlog-dev)
  [ -f /usr/include/fmt/format.h ] || need+=(libfmt-dev)
  [ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
  [ ${#need[@]} -eq 0 ] && return 0
  echo "graft: installing build dependencies: ${need[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  if ! command -v apt-get >/dev/null; then
    echo "graft: missing ${need[*]} and no apt-get to install them" >&2
    return 1
  fi
  if ! { $sudo apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null; }; then
    echo "graft: apt-get could not install ${need[*]} (no network?): install them, or build on a machine that has them and copy the build folder here (README.md)" >&2
    return 1
  fi
}

# Configures (once) and builds. Extra arguments are ninja targets.
graft_build() {
  if [ ! -f "$GRAFT_BUILD/build.ninja" ]; then
    meson setup "$GRAFT_BUILD" "$GRAFT_ROOT" >"$GRAFT_BUILD.setup.log" 2>&1 || {
      cat "$GRAFT_BUILD.setup.log" >&2
      echo "graft: meson setup failed (log above)" >&2
      return 1
    }
    rm -f "$GRAFT_BUILD.setup.log"
  fi
  ninja -C "$GRAFT_BUILD" "$@" >"$GRAFT_BUILD/ninja.log" 2>&1 || {
    tail -40 "$GRAFT_BUILD/ninja.log" >&2
    echo "graft: build failed (log: $GRAFT_BUILD/ninja.log)" >&2
    return 1
  }
}
