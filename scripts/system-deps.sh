#!/usr/bin/env bash
# Check (and, as root, install) the Debian packages modelfarm needs.
#
#   scripts/system-deps.sh           check; as root, apt-get install whatever is missing
#   scripts/system-deps.sh --check   check only, never install
#
# Exit status: 0 when the essential packages (headless EGL + Mesa) are present afterwards,
# 1 when one of them is still missing, 2 on a usage error. Missing optional packages are
# reported but do not fail the script when they cannot be installed.
# Fast and quiet when everything is present: no apt-get update, no apt-get install.
set -euo pipefail

# Headless rendering: libglvnd's EGL + Mesa's EGL driver + the llvmpipe/swrast DRI drivers,
# and libOpenGL.so.0 (PyOpenGL's desktop-GL entry points under PYOPENGL_PLATFORM=egl).
ESSENTIAL=(libegl1 libegl-mesa0 libgl1-mesa-dri libopengl0)
# libgles2: GLES entry points; libosmesa6: OSMesa fallback backend (gone in Mesa >= 25.1);
# libglfw3 + libgl1: GLFW backend; redis: broker for tests and local runs; chromium +
# chromium-driver: HTML report tests; fonts-dejavu-core: text in reports and thumbnails;
# libstorm9: StormLib, reading MPQ archives (maps, game data; renderer/assets/mpq.py); smpq:
# building MPQ archives in the asset tests; xvfb: an X server for `farm view`'s window test;
# podman: what podman-compose (the test extra) runs on, to read docker/compose.yaml as compose does,
# and what tests/test_image.py builds docker/Dockerfile with; mmdebstrap: that test's base image.
OPTIONAL=(libgles2 libosmesa6 libglfw3 libgl1 redis-server redis-tools chromium chromium-driver
  fonts-dejavu-core libstorm9 smpq xvfb podman mmdebstrap)

check_only=0
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  -h | --help)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "system-deps: unknown argument '$1' (use --check or nothing)" >&2
    exit 2
    ;;
esac

say() { echo "system-deps: $*"; }

if ! command -v dpkg-query >/dev/null 2>&1; then
  say "dpkg-query not found: not a Debian-like system, cannot check packages."
  say "Make sure these (or your distribution's equivalents) are installed:"
  say "  essential: ${ESSENTIAL[*]}"
  say "  optional:  ${OPTIONAL[*]}"
  exit 0
fi

installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

# Sets the globals missing_essential and missing_optional.
scan() {
  missing_essential=()
  missing_optional=()
  local p
  for p in "${ESSENTIAL[@]}"; do installed "$p" || missing_essential+=("$p"); done
  for p in "${OPTIONAL[@]}"; do installed "$p" || missing_optional+=("$p"); done
}

scan
if ((${#missing_essential[@]} + ${#missing_optional[@]} == 0)); then
  say "all ${#ESSENTIAL[@]} essential and ${#OPTIONAL[@]} optional packages present"
  exit 0
fi

missing=("${missing_essential[@]}" "${missing_optional[@]}")
say "missing Debian packages: ${missing[*]}"

if ((check_only == 0)) && [[ "$(id -u)" == "0" ]]; then
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=300)
  say "running apt-get update (once) and installing them"
  apt-get -q -o DPkg::Lock::Timeout=300 update
  if ! apt-get install "${apt_opts[@]}" "${missing[@]}"; then
    # One unavailable optional package must not keep EGL from being installed.
    say "installing all of them failed; retrying with the essential ones only"
    if ((${#missing_essential[@]})); then
      apt-get install "${apt_opts[@]}" "${missing_essential[@]}" || true
    fi
  fi
  scan
  if ((${#missing_optional[@]})); then
    say "WARNING: optional packages still missing: ${missing_optional[*]}"
  fi
  if ((${#missing_essential[@]})); then
    say "ERROR: essential packages still missing: ${missing_essential[*]}"
    exit 1
  fi
  say "done"
  exit 0
fi

# Not root (or --check): report, and say exactly what to run.
if ((${#missing_essential[@]})); then
  say "  essential (headless EGL rendering): ${missing_essential[*]}"
fi
if ((${#missing_optional[@]})); then
  say "  optional: ${missing_optional[*]}"
fi
say "install them with:"
say "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
if ((${#missing_essential[@]})); then
  say "ERROR: essential packages are missing"
  exit 1
fi
exit 0
