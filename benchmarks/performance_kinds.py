"""The benchmarks docs/performance.md shows (benchmarks/performance_doc.py renders them): each one's results' name
suffix, its heading, and how it was run, in the order of the document."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "Kind"]


@dataclass(frozen=True)
class Kind:
    """One benchmark: its results' name suffix, the heading, and how it was run."""

    suffix: str  # results/<UTC stamp><suffix>.md
    title: str
    how: str


KINDS = (
    Kind(
        "-peers",
        "Beside the other CPU runtimes",
        "`benchmarks/peers_side_by_side.sh`: gpt2-onnx beside OpenVINO GenAI, llama.cpp and CTranslate2 and PyTorch "
        "eager, one interleaved run, each system in its own process and environment.",
    ),
    Kind(
        "-peers-xeon",
        "Beside the other CPU runtimes, on an Intel Xeon",
        '`REPEATS=5 DECODE_CONTEXTS=128,1000 PEERS="openvino llama-cpp" SUFFIX=peers-xeon '
        "benchmarks/peers_side_by_side.sh`: the run above (decode after 1,000 tokens too, its growth over a run of "
        "as many steps after 128) on the other CPU this "
        "project meets (Intel Xeon with AMX and AVX-512 FP16; llama.cpp built without its AMX kernels, as "
        '`benchmarks/peers_install.sh` says); the table by `benchmarks/peers_table.py JSON --pair-with "OpenVINO '
        'fp32, f32 compute forced" --pair-with "llama.cpp q8_0" --pair-with "llama.cpp q4_0" --pair-with "OpenVINO '
        'int8 weights, f32 compute" --pair-with "OpenVINO int4 weights, CPU defaults"`.',
    ),
    Kind(
        "-peers-ep",
        "ONNX Runtime's OpenVINO execution provider",
        "`PEERS=openvino-ep OURS_DEFAULTS=0 SUFFIX=peers-ep benchmarks/peers_side_by_side.sh --ours ...`: our own "
        "fp32 export on `onnxruntime-openvino`'s OpenVINOExecutionProvider (`benchmarks/openvino_ep_system.py`) "
        "beside the CPU provider's default path, one interleaved run.",
    ),
    Kind(
        "-peers-prompt-kernel",
        "The prompt kernel beside the peers",
        '`PEERS="openvino llama-cpp" OURS_DEFAULTS=0 SUFFIX=peers-prompt-kernel benchmarks/peers_side_by_side.sh '
        "--ours ...`: our int8 and int4 exports with and without the runtime's `--prompt-kernel dynamic` "
        "(`runtimes/gpt2_onnx_runtimes/prompt_kernel.py`) beside OpenVINO GenAI and llama.cpp, one interleaved run.",
    ),
    Kind(
        "-modes",
        "gpt2-onnx's own CPU modes, before and after",
        "`benchmarks/runtime_modes.sh`: the merged and split session layouts, ONNX Runtime's spinning, `--optimize`, "
        "int8 and int4, against PyTorch eager in one interleaved run.",
    ),
    Kind(
        "-kernel-modes",
        "int8 and int4 kernels, end to end",
        "`SUFFIX=kernel-modes MODES=... benchmarks/runtime_modes.sh`: the int8 and int4 exports with each MatMul "
        "kernel and block size (`--matmul-kernel dynamic`, `--block-size 128`) beside the defaults and fp32, "
        "against PyTorch eager in one interleaved run.",
    ),
    Kind(
        "-kernels",
        "The prompt's matrix products by kernel",
        "`python benchmarks/matmul_kernels.py`: GPT-2-small's 48 projections alone, one ONNX Runtime kernel choice "
        "per session (fp32 MatMul; MatMulNBits by bits, block size and accuracy level; DynamicQuantizeMatMul), "
        "interleaved in one process, at 128 rows (a prompt) and 1 row (a decode step).",
    ),
    Kind(
        "-kernels-batch16",
        "A server's decode batch by kernel",
        "`python benchmarks/matmul_kernels.py --rows 16,1 --suffix=-batch16`: the same 48 projections at 16 rows (a "
        "server's decode batch of 16 clients) and 1 row: what the int4 block size costs batched decode.",
    ),
    Kind(
        "-kernels-xeon",
        "The prompt's matrix products by kernel, on an Intel Xeon",
        "`python benchmarks/matmul_kernels.py --suffix=-xeon`: the run above on the Intel Xeon (AMX, AVX-512 FP16). "
        "Every MatMulNBits choice takes longer over a 128-token prompt's projections alone than OpenVINO's int4 "
        "prefill whole (31.6 ms in results/20261204T220534Z-peers-xeon), and the one kernel that does not "
        "(DynamicQuantizeMatMul's QGEMM) needs int8 weights.",
    ),
    Kind(
        "-kernels-onnxruntime-release",
        "The matrix products in another ONNX Runtime release",
        "`python benchmarks/onnxruntime_release_kernels.py DIR`: the same 48 projections at 128, 16 and 1 rows in "
        "the installed ONNX Runtime and in another release (DIR, a `pip install --no-deps --target` of it), a "
        "process each, the order swapping pair by pair: whether a release's kernels change the targets that "
        "MatMulNBits keeps from being met.",
    ),
    Kind(
        "-gqa-cache",
        "The decode step's attention by KV cache format",
        "`python benchmarks/gqa_cache_formats.py`: GPT-2-small's 12 decode-step GroupQueryAttention nodes alone "
        "over a float32, int8 and int4 cache (the int4 one ONNX Runtime's `kv_cache_bit_width` 4, no runtime "
        "option), after 128 and after 1,000 positions, interleaved in one process: whether a cache smaller than "
        "int8 would make decode grow less with the context.",
    ),
    Kind(
        "-gqa-cache-xeon",
        "The decode step's attention by KV cache format, on an Intel Xeon",
        "`python benchmarks/gqa_cache_formats.py --suffix=-xeon`: the run above on the Intel Xeon (AMX, AVX-512 "
        "FP16): what the int8 cache's attention adds to a decode step between 128 and 1,000 positions.",
    ),
    Kind(
        "-cache-steps",
        "A whole decode step by KV cache format",
        "`python benchmarks/cache_format_steps.py EXPORT`: the runtime's own generation graph over a float32, int8 "
        "and int4 cache (the int4 one the int8 graph with ONNX Runtime's `kv_cache_bit_width` 4, no runtime "
        "option), one decode step after 128 and after 1,000 positions, interleaved in one process: whether a cache "
        "smaller than int8 makes a whole step grow less with the context, where the attention alone above keeps its "
        "cache in the CPU's caches.",
    ),
    Kind(
        "-cache-steps-xeon",
        "A whole decode step by KV cache format, on an Intel Xeon",
        "`python benchmarks/cache_format_steps.py EXPORT --suffix=-xeon`: the run above on the Intel Xeon (AMX, "
        "AVX-512 FP16).",
    ),
    Kind(
        "-clients-decode",
        "The C++ and .NET clients' decode loops",
        "`python3 benchmarks/clients_decode.py`: the C++ client (clients/cpp) and the .NET client (clients/dotnet) "
        "on the committed fixtures, each through its own library's generation path and the same ONNX Runtime "
        "native library from NuGet, a process each, the order swapping pair by pair: host time per token, prefill, "
        "and the .NET client's managed bytes allocated per token.",
    ),
    Kind(
        "-beam",
        "Beam search",
        "`benchmarks/beam_search.sh`: 4 beams, gpt2-onnx's runtime against transformers' `generate` in one run.",
    ),
    Kind(
        "-serve",
        "Serving",
        "`benchmarks/serve_load.sh`: `gpt2-onnx serve` driven on loopback by 1, 4 and 16 concurrent clients.",
    ),
    Kind(
        "-serve-peers",
        "Serving beside llama.cpp's server",
        "`benchmarks/serve_peers.sh`: `gpt2-onnx serve` (one replica) and llama.cpp's `llama-server` (16 slots, "
        "continuous batching, its prompt cache off) up at once on the same checkpoint, the same requests from 16 "
        "clients, rounds alternating between the two.",
    ),
    Kind(
        "-serve-spinning-fp32",
        "Serving with the replica's threads spinning or sleeping, fp32",
        '`python benchmarks/serve_options.py EXPORT --variant "spinning=--spinning" --variant '
        '"sleeping=--no-spinning" --repeats 3 --rounds 3`: one replica of our fp32 export with its ONNX Runtime '
        "threads spinning while they wait (ONNX Runtime's default) and sleeping (`serve`'s default since this run), "
        "one server up at a time, the same requests from 16 clients as the serving runs beside llama.cpp's server.",
    ),
    Kind(
        "-serve-spinning-int4",
        "Serving with the replica's threads spinning or sleeping, int4",
        "The run above on our int4 export (blocks of 32).",
    ),
    Kind(
        "-serve-spinning-int4-pk",
        "Serving with the replica's threads spinning or sleeping, int4 with the prompt kernel",
        "The run above on our int4 export with `--prompt-kernel dynamic` in both option sets.",
    ),
    Kind(
        "-serve-without-ray-int4",
        "Serving with and without Ray Serve, int4",
        '`python benchmarks/serve_options.py EXPORT --variant "serve=" --variant "without-ray=@without-ray" '
        "--repeats 4`: `gpt2-onnx serve` beside the same FastAPI app and batching engine under uvicorn alone "
        "(`benchmarks/serve_without_ray.py`: no Serve proxy, controller or replica actor, no Ray), one server up at "
        "a time, the same requests from 16 clients; what Ray Serve's own processes and hop cost on 2 cores.",
    ),
    Kind(
        "-serve-ray-quiet-int4",
        "Serving with Serve's controller loop slowed and Ray's metrics off, int4",
        '`python benchmarks/serve_options.py EXPORT --variant "serve=" --variant '
        '"loop-1s=RAY_SERVE_CONTROL_LOOP_INTERVAL_S=1" --variant "loop-1s-no-metrics=..." --repeats 4`: Serve\'s '
        "controller looping every second instead of every 0.1 s, and with Ray's metrics collection off too (Ray's "
        "own settings, as environment variables of the server). `mypy` ran beside the first repeat's first server "
        "(`serve`).",
    ),
    Kind(
        "-serve-ray-loop-int4",
        "Serving with Serve's controller loop at 0.5 s, and without Ray Serve, int4",
        '`python benchmarks/serve_options.py EXPORT --variant "serve=" --variant '
        '"loop-0.5s=RAY_SERVE_CONTROL_LOOP_INTERVAL_S=0.5" --variant "without-ray=@without-ray" --repeats 4`, '
        "with the CPU seconds each part of the server used per round.",
    ),
    Kind(
        "-serve-ray-paths-int4",
        "Serving with Serve's proxy calling over gRPC, or one event loop in the replica, int4",
        '`python benchmarks/serve_options.py EXPORT --variant "serve=" --variant '
        '"proxy-grpc=RAY_SERVE_PROXY_USE_GRPC=1" --variant "one-loop=RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD=0 '
        "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0\" --repeats 4`: two of Serve's own request paths beside its "
        "default.",
    ),
    Kind(
        "-serve-malloc-int4",
        "Serving with freed memory kept in the process, int4",
        '`python benchmarks/serve_options.py EXPORT --variant "serve=" --variant "malloc-kept='
        'MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824" --repeats 4`: glibc keeping freed memory '
        "instead of giving it back (the trim threshold at 1 GiB; the 256 MiB mmap threshold is beyond glibc's 32 MiB "
        "limit, so glibc ignores it) beside the default.",
    ),
    Kind(
        "-serve-peers-xeon",
        "Serving beside llama.cpp's server, on an Intel Xeon",
        "`SUFFIX=serve-peers-xeon benchmarks/serve_peers.sh`: the run above on the other CPU this project meets "
        "(Intel Xeon with AMX and AVX-512 FP16; llama.cpp built without its AMX kernels).",
    ),
    Kind(
        "-serve-peers-fp32",
        "Serving beside llama.cpp's server, fp32 alone",
        "`python benchmarks/serve_peers.py --llama-server BIN --pair fp32 FOLDER F32_GGUF --rounds 6`: the fp32 pair "
        "of `benchmarks/serve_peers.sh` alone, more rounds.",
    ),
    Kind(
        "-serve-peers-prompt-kernel",
        "Serving beside llama.cpp's server, with the prompt kernel",
        '`python benchmarks/serve_peers.py --llama-server BIN --pair int4 ... --pair "int4, --prompt-kernel dynamic" '
        "... prompt-kernel=dynamic ...`: the int4 pairs of `benchmarks/serve_peers.sh` again, after the prompt "
        "session's threads stopped spinning between prompts; same requests and clients.",
    ),
    Kind(
        "-batch-cache",
        "The serving batch's KV cache",
        "`python benchmarks/batch_cache.py FOLDER`: the serving engine's running batch with its KV cache copied into "
        "a new present every step (as before) against written in place (`InPlaceCache` in "
        "`runtimes/gpt2_onnx_runtimes/batch_cache.py`), the same requests, interleaved in one process. Runs from "
        "2026-12-02 18:00 UTC on add a third row: in place with the step's binding kept between changes of the batch "
        "(a step binds only its tokens, mask and positions), the engine as it ships since.",
    ),
    Kind(
        "-optimum",
        "Against Optimum-ONNX",
        "`benchmarks/optimum_side_by_side.sh`: Optimum-ONNX's `ORTModelForCausalLM` on the same checkpoint.",
    ),
    Kind(
        "-perplexity",
        "Perplexity by precision",
        "`python benchmarks/perplexity.py`: the trained checkpoint's exports at each precision (and the int4 block "
        "sizes and MatMulNBits accuracy levels) scored by ONNX Runtime over the same sliding windows of its held-out "
        'text as the checkpoint itself by PyTorch (docs/verification.md, "Perplexity"); rows `…-kv-int8`: the same '
        "export over the runtime's int8 KV cache (`--kv-cache int8`), scored step by step as it generates.",
    ),
    Kind(
        "-verify-modes",
        "verify over every precision and runtime mode",
        "`python scripts/verify_modes.py`: `gpt2-onnx verify --perplexity` on the trained checkpoint's exports at "
        "each precision and export option, in each runtime mode offered (the int8 KV cache, the prompt kernel, "
        "both), every comparison and the perplexity judged by the precision's limits; a mode an export does not "
        "offer must be refused in one line.",
    ),
    Kind(
        "-ttft-overhead",
        "Time to first token against the graph's prefill",
        "`python benchmarks/ttft_overhead.py FOLDER`: a generation's KV buffers fresh per request (every page faults "
        "on the prefill's first write) against the pool kept per loaded model (`BufferPool` in "
        "`runtimes/gpt2_onnx_runtimes/kv_buffers.py`), interleaved in one process.",
    ),
    Kind(
        "-ttft-inside",
        "The host's share of the first token",
        "`python benchmarks/ttft_overhead.py FOLDER ... --inside`: within each generation, its time to first token "
        "and the time its graph's runs took (the session's run timed around it); the difference is what the runtime "
        "adds around the graph (cache buffers, bindings, the first choice), without the noise of two separate calls.",
    ),
    Kind(
        "-prefill-chunk",
        "A long prompt's prefill chunk",
        "`python benchmarks/prefill_chunk.py FOLDER ... --chunks 64 128 256`: a 1,000-token prompt prefilled in "
        "chunks of each size (`RuntimeOptions(prefill_chunk=N)`), each configuration in a fresh process: time to "
        "first token, decode ms/token after it, and the process's peak RSS. The default chunk (256 with a float32 "
        "cache, 128 with the int8 one) was chosen from these figures.",
    ),
    Kind(
        "-prompt-kernel-128",
        "The prompt kernel's prompts, before and after a change: 128 tokens",
        "`python benchmarks/prefill_chunk.py FOLDER ... --prompt-kernel dynamic --context 128 --warm-context 128 "
        "--before DIR`: each export loaded with the prompt kernel (`RuntimeOptions(prompt_kernel='dynamic')`) by "
        "this checkout and by the code before a change (DIR, another checkout), in the same rounds, each "
        "configuration in a fresh process after an untimed generation like the timed one.",
    ),
    Kind(
        "-prompt-kernel-1000",
        "The prompt kernel's prompts, before and after a change: 1,000 tokens",
        "`python benchmarks/prefill_chunk.py FOLDER ... --prompt-kernel dynamic --context 1000 --warm-context 1000 "
        "--chunks 128 256 --before DIR`: the same with a 1,000-token prompt, prefilled in chunks of 128 and 256.",
    ),
    Kind(
        "-first-prompt",
        "The first prompts after a load",
        "`python benchmarks/first_prompt.py FOLDER ...`: the time to first token of four different 128-token "
        "prompts in a fresh process, and the page faults the disk served during each, with the weights file's "
        "private maps handed back as the runtime does now (`MADV_DONTNEED` where a map's pages are the file's own, "
        "`runtimes/gpt2_onnx_runtimes/mapped_pages.py`) against `MADV_PAGEOUT` for every map (before).",
    ),
    Kind(
        "-decode-context",
        "Decode as the context grows",
        "`nice python benchmarks/decode_context.py --exports FOLDER`: decode ms/token after prompts of 128, 512 and "
        "1,000 tokens, the KV cache copied into a new present every step (`in_place_kv` off) against written in place "
        "(on, the default: `runtimes/gpt2_onnx_runtimes/inplace_attention.py`), beside PyTorch eager, interleaved in "
        "one process.",
    ),
    Kind(
        "-floor",
        "The fp32 floor",
        "`benchmarks/weight_pass_floor.py`: the bare matrix products of a forward on the same weights, the speed no "
        "fp32 graph can beat.",
    ),
    Kind(
        "-peers-fp32",
        "The exact fp32 rows alone",
        '`python benchmarks/peers_side_by_side.py --checkpoint benchmarks/out/peers/checkpoint --ours "ours fp32" '
        'benchmarks/out/peers/gpt2-onnx-fp32 --peer "OV f32" benchmarks.openvino_system:forced_f32 OPENVINO_PY '
        "benchmarks/out/peers/openvino-fp32 --repeats 5 --threads 2`: the side-by-side benchmark's protocol with only "
        "our fp32 export, OpenVINO GenAI with f32 compute forced and PyTorch eager.",
    ),
    Kind(
        "-peers-growth",
        "Decode as the context grows, quantized, 24 rounds",
        "`python benchmarks/peers_side_by_side.py --checkpoint benchmarks/out/peers/checkpoint --ours LABEL FOLDER "
        '[kv_cache=int8] ... --peer "llama.cpp q8_0" benchmarks.llama_cpp_system:LlamaCppSystem LLAMA_PY q8_0.gguf '
        "--peer ... q4_0.gguf --repeats 24 --threads 2 --decode-contexts 1000`, the table by "
        '`benchmarks/peers_table.py JSON --pair-with "llama.cpp q8_0" --pair-with "llama.cpp q4_0"`: the side-by-side '
        "benchmark's protocol with only our int8 and int4 exports (with and without the int8 KV cache), llama.cpp's "
        "q8_0 and q4_0 and PyTorch eager, more rounds than the full run, and each system's growth paired per round "
        "with llama.cpp's.",
    ),
    Kind(
        "-peers-int8-growth",
        "Decode as the context grows, int8 and its options",
        "The same protocol as the previous section, 8 rounds: our int8 export with each of its options and their "
        "combinations (`--matmul-kernel dynamic`, `--prompt-kernel dynamic`, `--kv-cache int8`), llama.cpp q8_0, "
        "OpenVINO int8 and PyTorch eager; the growth paired per round with q8_0's.",
    ),
    Kind(
        "-peers-growth-24",
        "Decode as the context grows, 24 tokens after 1,000, beside llama.cpp and OpenVINO",
        "The protocol of the 24-round section above with `--context-new-tokens 24` (the decode run after the "
        "1,000-token prompt times 24 tokens, all of GPT-2's 1,024 positions, against 16 there) and OpenVINO's int8 "
        "and int4 folders (its CPU defaults) beside llama.cpp's q8_0 and q4_0; the table by `benchmarks/peers_table.py "
        'JSON --pair-with "llama.cpp q8_0" --pair-with "llama.cpp q4_0" --pair-with "OpenVINO int8 weights" '
        '--pair-with "OpenVINO int4 weights"`.',
    ),
    Kind(
        "-fp32-projections",
        "An fp32 prompt's kernels beside OpenVINO's",
        "`python benchmarks/fp32_projections.py --openvino-python PY`: one 128-token prompt's kernel time by "
        "projection, attention and the rest, from ONNX Runtime's profiler over our generation graph and from "
        "OpenVINO's performance counters over its own folder's graph (f32 compute), a process of each per round.",
    ),
    Kind(
        "-packed-qkv",
        "GroupQueryAttention reading the packed projection",
        "`python benchmarks/paired_graphs.py --compare packed-qkv FOLDER ...` (until 2026-12-03 05:00 UTC "
        "`benchmarks/packed_qkv.py`): the in-place cache's attention reading each layer's (B, S, 3d) projection "
        "itself against reading three Slices of it, both graphs in one process, alternating, paired over both run "
        "orders and both load orders; same tokens, first logits equal to the bit.",
    ),
    Kind(
        "-packed-qkv-kv-int8",
        "GroupQueryAttention reading the packed projection, over the int8 KV cache",
        "`python benchmarks/paired_graphs.py --compare packed-qkv --kv-cache int8 FOLDER ...`: the same comparison "
        "over the runtime's int8 KV cache (`--kv-cache int8`), whose graph read three Slices until 2026-12-03 "
        "18:00 UTC (its calibration probes were the keys and values themselves; now the packed projection).",
    ),
    Kind(
        "-last-layer",
        "The last layer past its attention on the last position only",
        "`python benchmarks/paired_graphs.py --compare last-layer FOLDER ...`: the generation graph's last layer "
        "running its output projection, MLP and norms on the last position only (the default) against on every "
        "position, both graphs in one process, alternating, paired over both run orders and both load orders; "
        "same tokens.",
    ),
    Kind(
        "-prefill-last-position",
        "prefill.onnx with its last block on the last position",
        "`python benchmarks/peers_side_by_side.py --checkpoint benchmarks/out/peers/checkpoint --ours LABEL FOLDER "
        "layout=split ... --repeats 10 --threads 2`, the table by `benchmarks/peers_table.py JSON --pair-with LABEL`: "
        "the split layout, which runs a prompt through the folder's own prefill.onnx as the C++, C# and JavaScript "
        "consumers do, on exports made before and after the exporter ran the last block past its attention on the "
        "last position only; the prefill and decode of each paired per round with the export made before.",
    ),
    Kind(
        "-single-row-head",
        "The tied head's single row over the transposed table",
        "`python benchmarks/paired_graphs.py --compare single-row-head FOLDER`: fp32, the tied head of a batch of "
        "one row multiplying a transposed copy of the table made at load (`RuntimeOptions.single_row_head`, the "
        "default) against Gemm(x, table, transB=1) over the table as stored, both graphs in one process, "
        "alternating, paired over both run orders and both load orders; same tokens.",
    ),
)
