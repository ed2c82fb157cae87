#!/usr/bin/env bash
# The .NET part of .ci/run (where dotnet is), from a clean clone: restore (the machine's own NuGet sources, plus
# NUGET_SOURCE if set), build with warnings as errors, the xunit tests, dotnet pack and what the package holds, the
# packed package in a fresh application, the sample (golden check on both fixtures, --genai, run --json), Native AOT
# publish + run, and a smoke run of the decode benchmark (its JSON's shape only; timings are the coordinator's
# benchmark). Builds are CI builds (ContinuousIntegrationBuild: deterministic, source paths mapped to /_/).
#   NUGET_SOURCE  an extra NuGet feed or package folder (e.g. /opt/nuget/packages), added to the machine's sources
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FIXTURES="$ROOT/fixtures"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
cd "$HERE"
ARTIFACTS="$HERE/artifacts"
rm -rf "$ARTIFACTS"
SOURCES=()  # never --source: that would replace the machine's configured sources (a mirror, say) instead of adding
[ -z "${NUGET_SOURCE:-}" ] || SOURCES=(-p:RestoreAdditionalProjectSources="$NUGET_SOURCE")
CI_BUILD=(-p:ContinuousIntegrationBuild=true)
step() { echo "== dotnet: $*"; }

step "restore, build (warnings are errors)"
dotnet restore Gpt2Onnx.sln "${SOURCES[@]}"
dotnet build Gpt2Onnx.sln -c Release --no-restore "${CI_BUILD[@]}"

step "tests"
dotnet test Gpt2Onnx.sln -c Release --no-build

step "pack, and what the package holds"
dotnet pack src/Gpt2Onnx/Gpt2Onnx.csproj -c Release --no-build "${CI_BUILD[@]}" -o "$ARTIFACTS/packages"
VERSION=$(sed -n 's|.*<Version>\(.*\)</Version>.*|\1|p' src/Gpt2Onnx/Gpt2Onnx.csproj)
NUPKG="$ARTIFACTS/packages/Gpt2Onnx.$VERSION.nupkg"
SNUPKG="$ARTIFACTS/packages/Gpt2Onnx.$VERSION.snupkg"
ls "$NUPKG" "$SNUPKG"
check_package() {  # the nupkg's files and nuspec: README, DLL + XML docs, licence, ONNX Runtime's managed API only
  local dir="$ARTIFACTS/package-check" f nuspec
  rm -rf "$dir" && mkdir -p "$dir/nupkg" "$dir/snupkg"
  unzip -Z1 "$NUPKG" > "$dir/files"
  unzip -q "$NUPKG" -d "$dir/nupkg" && unzip -q "$SNUPKG" -d "$dir/snupkg"
  for f in README.md lib/net10.0/Gpt2Onnx.dll lib/net10.0/Gpt2Onnx.xml Gpt2Onnx.nuspec; do
    grep -qxF "$f" "$dir/files" || { echo "package: $f missing"; return 1; }
  done
  [ -f "$dir/snupkg/lib/net10.0/Gpt2Onnx.pdb" ] || { echo "symbols: no lib/net10.0/Gpt2Onnx.pdb"; return 1; }
  nuspec=$(unzip -p "$NUPKG" Gpt2Onnx.nuspec)
  grep -qF '<license type="expression">MIT</license>' <<<"$nuspec" || { echo "package: no MIT licence"; return 1; }
  grep -qF '<readme>README.md</readme>' <<<"$nuspec" || { echo "package: no readme"; return 1; }
  grep -qF 'id="Microsoft.ML.OnnxRuntime.Managed"' <<<"$nuspec" || { echo "package: no ONNX Runtime API"; return 1; }
  if grep -qF 'id="Microsoft.ML.OnnxRuntime"' <<<"$nuspec"; then
    echo "package: depends on the native Microsoft.ML.OnnxRuntime (the application chooses it)"; return 1
  fi
  # A CI build maps source paths to /_/: no path of this clone inside the DLL or its PDB.
  for f in nupkg/lib/net10.0/Gpt2Onnx.dll snupkg/lib/net10.0/Gpt2Onnx.pdb; do
    [ "$(grep -caF "$ROOT" "$dir/$f")" = 0 ] || { echo "package: $f holds $ROOT"; return 1; }
  done
  echo "package: $(wc -l < "$dir/files") files (README.md, lib/net10.0/Gpt2Onnx.dll and .xml), licence MIT," \
    "depends on $(grep -o 'dependency id="[^"]*"' <<<"$nuspec" | cut -d'"' -f2 | paste -sd' ' -);" \
    "no path of the clone in the DLL or the PDB"
}
check_package

step "the packed package in a fresh application"
expected_ids() {  # fixtures/expectations.json: the first prompt's greedy ids of export $1, space-separated
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["exports"][sys.argv[2]]["prompts"][0]
print(d["text"]); print(" ".join(map(str, d["greedy"]["ids"])))' "$FIXTURES/expectations.json" "$1"
}
CONSUMER=$(mktemp -d)
trap 'rm -rf "$CONSUMER"' EXIT
cp tests/PackageConsumer/PackageConsumer.csproj tests/PackageConsumer/Program.cs "$CONSUMER/"
# The folder dotnet pack wrote, added to the machine's sources (no <clear/>: its own feeds still serve the rest).
cat > "$CONSUMER/NuGet.config" <<EOF
<configuration><packageSources>
  <add key="gpt2onnx-packed" value="$ARTIFACTS/packages" />
</packageSources></configuration>
EOF
rm -rf "${NUGET_PACKAGES:-$HOME/.nuget/packages}/gpt2onnx/$VERSION"  # this build's package, never a cached one
{ read -r PROMPT; read -r IDS; } < <(expected_ids pydocs-micro-fp32)
GOT=$(cd "$CONSUMER" && dotnet run -c Release -p:Gpt2OnnxVersion="$VERSION" "${SOURCES[@]}" -- \
  "$FIXTURES/pydocs-micro-fp32" "$PROMPT" 16)
[ "$GOT" = "$IDS" ] || { echo "consumer: got [$GOT], expected [$IDS]"; exit 1; }
echo "consumer application on Gpt2Onnx $VERSION: greedy ids equal the expectations ($GOT)"

step "sample: golden check (both fixtures), onnxruntime-genai, run"
SAMPLE="dotnet samples/Gpt2Onnx.Sample/bin/Release/net10.0/gpt2-onnx-dotnet.dll"
for name in pydocs-micro-fp32 pydocs-micro-int4; do
  $SAMPLE check "$FIXTURES/$name" --genai | tail -n 1
done
RUN_JSON=$($SAMPLE run "$FIXTURES/pydocs-micro-fp32" --prompt "The os module" --max-new-tokens 16 --seed 42 --json)
echo "$RUN_JSON"

step "Native AOT: publish the sample and run it"
dotnet publish samples/Gpt2Onnx.Sample/Gpt2Onnx.Sample.csproj -c Release -r linux-x64 -p:PublishAot=true \
  "${SOURCES[@]}" "${CI_BUILD[@]}" -o "$ARTIFACTS/aot" | tail -n 3
AOT="$ARTIFACTS/aot/gpt2-onnx-dotnet"
$AOT check "$FIXTURES/pydocs-micro-int4" | tail -n 1
AOT_JSON=$($AOT run "$FIXTURES/pydocs-micro-fp32" --prompt "The os module" --max-new-tokens 16 --seed 42 --json)
[ "$AOT_JSON" = "$RUN_JSON" ] || { echo "AOT run differs: $AOT_JSON"; exit 1; }
echo "AOT binary ($(du -h "$AOT" | cut -f1)): the same seeded run as the JIT build"

step "decode benchmark (smoke run: the JSON's shape, never its timings)"
for name in pydocs-micro-fp32 pydocs-micro-int4; do
  dotnet bench/Gpt2Onnx.Bench/bin/Release/net10.0/gpt2-onnx-dotnet-bench.dll "$FIXTURES/$name" \
    --prompt 8 --new 8 --rounds 2 --warmup 1 --json | python3 -c '
import json, sys
line = sys.stdin.read().strip()
out = json.loads(line)
keys = {"client", "folder", "precision", "onnxruntime", "threads", "prompt_tokens", "new_tokens", "rounds",
        "prefill_ms", "decode_ms_per_token", "allocated_bytes_per_token", "peak_rss_mib"}
assert keys <= out.keys() and "\n" not in line, out
assert out["client"] == "dotnet" and out["onnxruntime"] == "1.31.1" and out["rounds"] == 2
assert all(len(out[k]) == 2 for k in ("prefill_ms", "decode_ms_per_token", "allocated_bytes_per_token"))
assert max(out["allocated_bytes_per_token"]) <= 1024, out["allocated_bytes_per_token"]
print("bench", out["precision"] + ": JSON ok, allocated bytes per token", out["allocated_bytes_per_token"])'
done
echo "dotnet: all steps passed"
