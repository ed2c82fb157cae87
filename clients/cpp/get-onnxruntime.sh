#!/usr/bin/env bash
# Put ONNX Runtime (library + C/C++ headers), onnxruntime-genai (library + C header; NuGet only) and nlohmann/json
# (headers) under clients/cpp/third_party/, using only the package registries (NuGet, PyPI, Debian). Safe to run
# again: it does nothing when its stamp matches.
#
# ORT_SOURCE=nuget (where dotnet is; this needs nothing restored before it):
#   a throwaway project in a temporary folder references Microsoft.ML.OnnxRuntime $ORT_VERSION and
#   Microsoft.ML.OnnxRuntimeGenAI $GENAI_VERSION; `dotnet restore` fetches both .nupkg from the configured NuGet
#   source into the NuGet package folder, and this script unpacks them (a .nupkg is a zip):
#   third_party/onnxruntime/lib/       runtimes/linux-x64/native/libonnxruntime.so, as libonnxruntime.so.<ver> with
#                                      the libonnxruntime.so.1 (its SONAME) and libonnxruntime.so links
#   third_party/onnxruntime/include/   build/native/include/ (the package's own headers)
#   third_party/onnxruntime-genai/     lib/libonnxruntime-genai.so and include/ort_genai_c.h, ort_genai.h: the text
#                                      layer's tokenizer (CMake's GPT2_ONNX_TEXT=AUTO finds them here)
# ORT_SOURCE=pypi (a Python machine: PyPI and Debian, no dotnet):
#   third_party/onnxruntime/lib/       libonnxruntime.so.1.<ver> from the PyPI wheel (onnxruntime/capi/), with the
#                                      libonnxruntime.so.1 and libonnxruntime.so links added here
#   third_party/onnxruntime/include/   onnxruntime_cxx_api.h and friends from the libonnxruntime-dev of Debian
#                                      $DEBIAN_SUITE (default trixie; bookworm has none); downloaded with a private
#                                      apt configuration and unpacked with dpkg-deb, never installed
#   no onnxruntime-genai: the onnxruntime-genai wheel carries no C headers and Debian has no package, so the
#   library builds without the text layer there.
# Both: third_party/nlohmann/include/  nlohmann/json.hpp: copied from an installed nlohmann-json3-dev
#                                      (/usr/include/nlohmann), else that package of this machine's own Debian
#                                      release (bookworm: 3.11.2; $DEBIAN_SUITE where /etc/os-release names none),
#                                      downloaded the same private way. Only PyPI mode reads $DEBIAN_SUITE otherwise.
#
# The library must be at least as new as the headers (a newer library serves every older C API version).
# The layout (include/, lib/) is that of the official ONNX Runtime release archives, so -DONNXRUNTIME_ROOT can
# point at one of those instead where they can be downloaded.
#
# Environment:
#   PYTHON         a Python with pip (default: python3)
#   ORT_PACKAGE    onnxruntime (CPU, default) or onnxruntime-gpu (adds the CUDA provider libraries)
#   ORT_VERSION    wheel version (default 1.31.1)
#   DEBIAN_SUITE   Debian release to take ONNX Runtime's headers from in PyPI mode (default trixie)
#   DEBIAN_MIRROR  Debian archive URL; default: the one this machine's apt uses for its own release
#   ORT_SOURCE     nuget, pypi, or auto (default): nuget where dotnet is, else pypi
#   GENAI_VERSION  Microsoft.ML.OnnxRuntimeGenAI version (default 0.18.0: the newest served that asks for no newer
#                  Microsoft.ML.OnnxRuntime than the project's 1.31.1; 0.20.0 needs 1.32.0)
#   NUGET_PACKAGES the NuGet package folder dotnet restore fills (default: dotnet's, ~/.nuget/packages)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
THIRD_PARTY=${THIRD_PARTY:-$HERE/third_party}
PYTHON=${PYTHON:-python3}
ORT_PACKAGE=${ORT_PACKAGE:-onnxruntime}
ORT_VERSION=${ORT_VERSION:-1.31.1}
GENAI_VERSION=${GENAI_VERSION:-0.18.0}
DEBIAN_SUITE=${DEBIAN_SUITE:-trixie}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

die() { echo "get-onnxruntime.sh: $*" >&2; exit 1; }

ORT_SOURCE=${ORT_SOURCE:-auto}
if [ "$ORT_SOURCE" = auto ]; then
  if command -v dotnet >/dev/null 2>&1; then ORT_SOURCE=nuget; else ORT_SOURCE=pypi; fi
fi
case "$ORT_SOURCE" in
  pypi) STAMP_TEXT="$ORT_PACKAGE==$ORT_VERSION headers:$DEBIAN_SUITE source:pypi" ;;
  nuget) STAMP_TEXT="Microsoft.ML.OnnxRuntime==$ORT_VERSION Microsoft.ML.OnnxRuntimeGenAI==$GENAI_VERSION source:nuget" ;;
  *) die "ORT_SOURCE must be pypi, nuget or auto, not '$ORT_SOURCE'" ;;
esac
if [ -f "$THIRD_PARTY/.stamp" ] && [ "$(cat "$THIRD_PARTY/.stamp")" = "$STAMP_TEXT" ] \
  && [ -e "$THIRD_PARTY/onnxruntime/lib/libonnxruntime.so" ] \
  && [ -f "$THIRD_PARTY/onnxruntime/include/onnxruntime_cxx_api.h" ] \
  && [ -f "$THIRD_PARTY/nlohmann/include/nlohmann/json.hpp" ] \
  && { [ "$ORT_SOURCE" = pypi ] || [ -f "$THIRD_PARTY/onnxruntime-genai/include/ort_genai_c.h" ]; }; then
  echo "ONNX Runtime already in $THIRD_PARTY ($STAMP_TEXT)"
  exit 0
fi

# The Debian archive this machine's apt already uses for its own release (one-line .list or deb822 .sources).
debian_mirror() {
  local codename
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || return 0
  {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] || continue
      sed -E 's/\[[^]]*\]//' "$f" | awk -v c="$codename" '$1 == "deb" && $3 == c { print $2 }'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk -v c="$codename" 'BEGIN { RS = ""; FS = "\n" } {
        uri = ""; hit = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); uri = u[2] }
          if ($i ~ /^Suites:/) { n = split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] == c) hit = 1 }
        }
        if (hit && uri != "") print uri
      }' "$f"
    done
  } | head -n 1
}

# `dotnet restore` of a throwaway project in $WORK puts both packages into the NuGet package folder from whatever
# source dotnet is configured with (nothing else needs to have restored them first); prints that folder.
restore_nuget() {
  command -v dotnet >/dev/null 2>&1 || die "ORT_SOURCE=nuget needs dotnet (the .NET SDK) to restore the packages"
  local project=$WORK/restore framework
  framework=net$(dotnet --version | cut -d. -f1).0
  mkdir -p "$project"
  cat >"$project/restore.csproj" <<CSPROJ
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>$framework</TargetFramework></PropertyGroup>
  <ItemGroup>
    <PackageReference Include="Microsoft.ML.OnnxRuntime" Version="$ORT_VERSION" />
    <PackageReference Include="Microsoft.ML.OnnxRuntimeGenAI" Version="$GENAI_VERSION" />
  </ItemGroup>
</Project>
CSPROJ
  echo "Restoring Microsoft.ML.OnnxRuntime $ORT_VERSION and Microsoft.ML.OnnxRuntimeGenAI $GENAI_VERSION with dotnet" >&2
  local args=(restore "$project/restore.csproj" --verbosity quiet)
  [ -z "${NUGET_PACKAGES:-}" ] || args+=(--packages "$NUGET_PACKAGES")
  dotnet "${args[@]}" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log" >&2; die "dotnet restore failed"; }
  if [ -n "${NUGET_PACKAGES:-}" ]; then
    echo "$NUGET_PACKAGES"
  else  # "global-packages: /root/.nuget/packages/"
    dotnet nuget locals global-packages --list | sed -nE 's/^global-packages: *(.*[^/])\/?$/\1/p'
  fi
}

# Unpack one restored package (a .nupkg is a zip) into $WORK/nupkg-<id>; prints that folder.
unpack_nupkg() {
  local packages=$1 id=$2 version=$3 nupkg
  nupkg=$(ls "$packages/$id/$version"/*.nupkg 2>/dev/null | head -n 1 || true)
  [ -n "$nupkg" ] || die "no $id $version .nupkg in $packages after dotnet restore"
  mkdir -p "$WORK/nupkg-$id"
  (cd "$WORK/nupkg-$id" && cmake -E tar xf "$nupkg")
  echo "$WORK/nupkg-$id"
}

# ONNX Runtime and onnxruntime-genai from NuGet into $STAGE.
stage_from_nuget() {
  local packages ort genai native=runtimes/linux-x64/native
  packages=$(restore_nuget)
  [ -d "$packages" ] || die "cannot find the NuGet package folder dotnet restore used"
  ort=$(unpack_nupkg "$packages" microsoft.ml.onnxruntime "$ORT_VERSION")
  [ -f "$ort/$native/libonnxruntime.so" ] || die "Microsoft.ML.OnnxRuntime $ORT_VERSION has no $native/libonnxruntime.so"
  cp -R "$ort/build/native/include/." "$STAGE/onnxruntime/include/"
  cp "$ort/$native/libonnxruntime.so" "$STAGE/onnxruntime/lib/libonnxruntime.so.$ORT_VERSION"
  ln -s "libonnxruntime.so.$ORT_VERSION" "$STAGE/onnxruntime/lib/libonnxruntime.so.1"
  ln -s libonnxruntime.so.1 "$STAGE/onnxruntime/lib/libonnxruntime.so"
  echo "$ORT_VERSION" >"$STAGE/onnxruntime/VERSION"
  genai=$(unpack_nupkg "$packages" microsoft.ml.onnxruntimegenai "$GENAI_VERSION")
  [ -f "$genai/$native/libonnxruntime-genai.so" ] || die "Microsoft.ML.OnnxRuntimeGenAI $GENAI_VERSION has no $native/libonnxruntime-genai.so"
  mkdir -p "$STAGE/onnxruntime-genai/lib" "$STAGE/onnxruntime-genai/include"
  cp "$genai/$native/libonnxruntime-genai.so" "$STAGE/onnxruntime-genai/lib/"
  cp "$genai"/build/native/include/ort_genai*.h "$STAGE/onnxruntime-genai/include/"
  echo "$GENAI_VERSION" >"$STAGE/onnxruntime-genai/VERSION"
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
STAGE=$WORK/third_party
mkdir -p "$STAGE/onnxruntime/lib" "$STAGE/onnxruntime/include" "$STAGE/nlohmann/include"

# 1. Headers. nlohmann/json: the installed nlohmann-json3-dev where there is one, else Debian's package of this
# machine's own release; ONNX Runtime's (PyPI mode only): $DEBIAN_SUITE's libonnxruntime-dev. What must be
# downloaded comes through a private apt configuration (own lists, cache, sources) reading only the suites needed.
OWN_SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
DEBS=()  # package/suite
if [ -f /usr/include/nlohmann/json.hpp ]; then
  cp -R /usr/include/nlohmann "$STAGE/nlohmann/include/"
  echo "nlohmann/json from the installed nlohmann-json3-dev" \
    "$(dpkg-query -W -f='${Version}' nlohmann-json3-dev 2>/dev/null || echo '(not from a package)')"
else
  DEBS+=("nlohmann-json3-dev/${OWN_SUITE:-$DEBIAN_SUITE}")
fi
[ "$ORT_SOURCE" = nuget ] || DEBS+=("libonnxruntime-dev/$DEBIAN_SUITE")
if [ "${#DEBS[@]}" -gt 0 ]; then
  MIRROR=${DEBIAN_MIRROR:-$(debian_mirror)}
  [ -n "$MIRROR" ] || die "cannot find this machine's Debian mirror in /etc/apt; set DEBIAN_MIRROR"
  [ -f "$KEYRING" ] || die "$KEYRING is missing (apt-get install debian-archive-keyring)"
  APT_DIR=$WORK/apt
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$APT_DIR/preferences.d" "$WORK/debs"
  SUITES=$(printf '%s\n' "${DEBS[@]}" | sed 's|.*/||' | sort -u)
  for suite in $SUITES; do
    echo "deb [signed-by=$KEYRING] $MIRROR $suite main"
  done >"$APT_DIR/sources.list"
  APT_OPTS=(
    -o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o "Dir::Etc::SourceParts=-"
    -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache"
    -o "Dir::Etc::Preferences=$APT_DIR/preferences" -o "Dir::Etc::PreferencesParts=$APT_DIR/preferences.d"
  )
  if [ "$(id -u)" = 0 ]; then
    APT_OPTS+=(-o "APT::Sandbox::User=root")  # the _apt user cannot write into our private folder
  fi
  echo "Reading the package lists of $(echo $SUITES | sed 's/ /, /g') from $MIRROR for ${DEBS[*]}"
  if ! apt-get "${APT_OPTS[@]}" -qq update >"$WORK/apt-update.log" 2>&1; then
    cat "$WORK/apt-update.log" >&2
    die "apt-get update for $SUITES from $MIRROR failed"
  fi
  (cd "$WORK/debs" && apt-get "${APT_OPTS[@]}" -qq download "${DEBS[@]}") || die "apt-get download ${DEBS[*]} failed"
  for deb in "$WORK"/debs/*.deb; do
    dpkg-deb -x "$deb" "$WORK/root"
  done
  if [ ! -f "$STAGE/nlohmann/include/nlohmann/json.hpp" ]; then
    cp -R "$WORK/root/usr/include/nlohmann" "$STAGE/nlohmann/include/"
  fi
fi
if [ "$ORT_SOURCE" = nuget ]; then
  stage_from_nuget
  echo "$STAMP_TEXT" >"$STAGE/.stamp"
  rm -rf "$THIRD_PARTY"; mkdir -p "$(dirname "$THIRD_PARTY")"; mv "$STAGE" "$THIRD_PARTY"
  echo "ONNX Runtime $ORT_VERSION and onnxruntime-genai $GENAI_VERSION (NuGet, their own headers) and nlohmann/json in $THIRD_PARTY"
  exit 0
fi
cp -R "$WORK/root/usr/include/onnxruntime/." "$STAGE/onnxruntime/include/"
HEADER_API=$(sed -nE 's/^#define ORT_API_VERSION ([0-9]+).*/\1/p' "$STAGE/onnxruntime/include/onnxruntime_c_api.h")
[ -n "$HEADER_API" ] || die "no ORT_API_VERSION in the downloaded onnxruntime_c_api.h"

# 2. Library: the wheel's onnxruntime/capi/lib*.so* (and, in onnxruntime-gpu, the provider libraries beside it).
LIB_MINOR=$(echo "$ORT_VERSION" | cut -d. -f2)
[ "$LIB_MINOR" -ge "$HEADER_API" ] \
  || die "ONNX Runtime $ORT_VERSION is older than the headers (1.$HEADER_API); set ORT_VERSION >= 1.$HEADER_API"
echo "Downloading $ORT_PACKAGE==$ORT_VERSION from PyPI"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$WORK/wheel" "$ORT_PACKAGE==$ORT_VERSION"
"$PYTHON" - "$WORK"/wheel/*.whl "$STAGE/onnxruntime/lib" <<'EOF'
import sys, zipfile
from pathlib import Path

wheel, target = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        path = Path(name)
        if path.parent.as_posix() == "onnxruntime/capi" and path.name.startswith("lib") and ".so" in path.name:
            (target / path.name).write_bytes(archive.read(name))
EOF
LIB=$(cd "$STAGE/onnxruntime/lib" && ls libonnxruntime.so.1.* 2>/dev/null | head -n 1)
[ -n "$LIB" ] || die "the $ORT_PACKAGE wheel has no onnxruntime/capi/libonnxruntime.so.1.*"
ln -s "$LIB" "$STAGE/onnxruntime/lib/libonnxruntime.so.1"
ln -s libonnxruntime.so.1 "$STAGE/onnxruntime/lib/libonnxruntime.so"
echo "$ORT_VERSION" >"$STAGE/onnxruntime/VERSION"

# 3. Replace the old folder only now that the new one is complete.
echo "$STAMP_TEXT" >"$STAGE/.stamp"
rm -rf "$THIRD_PARTY"
mkdir -p "$(dirname "$THIRD_PARTY")"
mv "$STAGE" "$THIRD_PARTY"
echo "ONNX Runtime $ORT_VERSION ($LIB, headers C API $HEADER_API) and nlohmann/json in $THIRD_PARTY"
