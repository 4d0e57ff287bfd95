#!/usr/bin/env bash
# The runtime stage of deploy/Dockerfile installs every Debian package whose shared libraries the
# built binaries load. The image only holds the binaries and what that stage's `apt-get install`
# brings in (with the packages' own dependencies), so a library linked in later (oneTBB was) would
# make the container die at start with "error while loading shared libraries", and no test
# that runs the binaries on the build host would notice. Usage: check_image_libraries.sh SRC BIN...
set -euo pipefail
src="$1"
shift
for tool in ldd dpkg-query apt-cache; do
  if ! command -v "$tool" > /dev/null; then
    echo "SKIP: $tool not found (a Debian host is needed to map libraries to packages)"
    exit 77
  fi
done

# The packages the last stage installs: the words after `install` up to the end of that command.
dockerfile="$src/deploy/Dockerfile"
runtime_stage="$(awk '/^FROM /{stage=""} {stage = stage $0 "\n"} END{printf "%s", stage}' \
  "$dockerfile")"
packages="$(printf '%s' "$runtime_stage" | tr -d '\\' | tr '\n' ' ' |
  grep -o 'apt-get install[^&;]*' | sed 's/apt-get install//' | tr ' ' '\n' |
  grep -E '^[a-z0-9][a-z0-9.+-]+$' || true)"
if [ -z "$packages" ]; then
  echo "FAIL: no apt-get install in the last stage of $dockerfile"
  exit 1
fi
# shellcheck disable=SC2086
if ! closure="$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances $packages 2> /dev/null | grep -v '^ ' |
  grep -v '^<')"; then
  echo "SKIP: apt-cache cannot resolve the runtime packages (no package lists: apt-get update)"
  exit 77
fi

status=0
for bin in "$@"; do
  if ldd "$bin" | grep -q 'not found'; then
    echo "FAIL: $bin: $(ldd "$bin" | grep 'not found' | tr '\n' ' ')"
    status=1
  fi
  for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
    owner="$(dpkg-query -S "$lib" 2> /dev/null || dpkg-query -S "$(readlink -f "$lib")" 2> /dev/null ||
      true)"
    package="${owner%%:*}"
    if [ -z "$package" ]; then
      echo "FAIL: $(basename "$bin") loads $lib, which no Debian package installs"
      status=1
      continue
    fi
    # Priority-required packages are in every Debian base image (debootstrap minbase too).
    if [ "$(dpkg-query -W -f='${Priority}' "$package" 2> /dev/null)" = "required" ]; then continue; fi
    if ! grep -qx "$package" <<< "$closure"; then
      echo "FAIL: $(basename "$bin") loads $lib from package $package, which the runtime stage" \
        "of deploy/Dockerfile does not install (add it to its apt-get install)"
      status=1
    fi
  done
done
if [ "$status" -eq 0 ]; then
  echo "OK: every shared library of $* comes with the runtime stage's packages:" $packages
fi
exit "$status"
