#!/usr/bin/env bash
# .NET part of .ci/run (where dotnet is): restore offline from the machine's NuGet feed, build the solution
# (library, sample, tests), run the xunit tests against the committed fixtures, then the sample's golden check on
# fp32 and int4 and its --genai path on fp32.
#   NUGET_SOURCE  the NuGet feed or local package folder to restore from (default: the machine's NuGet.config)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
SLN="$HERE/Gpt2Onnx.sln"
RESTORE=()
[ -z "${NUGET_SOURCE:-}" ] || RESTORE=(--source "$NUGET_SOURCE")
dotnet restore "$SLN" "${RESTORE[@]}"
dotnet build "$SLN" -c Release --no-restore
dotnet test "$SLN" -c Release --no-build
SAMPLE="$HERE/Gpt2OnnxSample.csproj"
for name in pydocs-micro-fp32 pydocs-micro-int4; do
  dotnet run --project "$SAMPLE" -c Release --no-build -- "$ROOT/fixtures/$name" --no-batch
done
dotnet run --project "$SAMPLE" -c Release --no-build -- "$ROOT/fixtures/pydocs-micro-fp32" --genai
