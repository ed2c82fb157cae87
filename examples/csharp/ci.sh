#!/usr/bin/env bash
# .NET part of .ci/run (where dotnet is): restore offline from the machine's NuGet feed, build the sample, and run
# its golden check against the committed fixtures (fp32 and int4), then the onnxruntime-genai path on fp32.
#   NUGET_SOURCE  the NuGet feed or local package folder to restore from (default: the machine's NuGet.config)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
RESTORE=()
[ -z "${NUGET_SOURCE:-}" ] || RESTORE=(--source "$NUGET_SOURCE")
dotnet restore "$HERE/Gpt2OnnxSample.csproj" "${RESTORE[@]}"
dotnet build "$HERE/Gpt2OnnxSample.csproj" -c Release --no-restore
for name in pydocs-tiny-fp32 pydocs-tiny-int4; do
  dotnet run --project "$HERE/Gpt2OnnxSample.csproj" -c Release --no-build -- "$ROOT/fixtures/$name" --no-batch
done
dotnet run --project "$HERE/Gpt2OnnxSample.csproj" -c Release --no-build -- "$ROOT/fixtures/pydocs-tiny-fp32" --genai
# The xunit tests against fixtures/expectations.json.
dotnet restore "$HERE/tests/Gpt2Onnx.Tests.csproj" "${RESTORE[@]}"
dotnet test "$HERE/tests/Gpt2Onnx.Tests.csproj" -c Release --no-restore
