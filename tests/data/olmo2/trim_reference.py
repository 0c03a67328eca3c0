"""Trims greedy_ref's output to what olmo2_parity_test.cc reads, one step per line.

usage: python3 trim_reference.py FULL.json OUT.json
Keeps prompt, prompt_ids, generated_ids and per step id, logprob and gap (top-1 minus top-2
logprob); adds the provenance fields.
"""
import json
import sys

full = json.load(open(sys.argv[1]))
head = {
    "model": "olmo2.gguf",
    "what": "llama.cpp on the OLMo 2 test model that olmo2_parity_test.cc writes from "
            "TinyStories-656K (F32 weights, F32 arithmetic)",
    "made": "llama.cpp source tree /work/llama-src (ggml 0.18.1; no git metadata, so no commit "
            "id), CPU build; tests/data/moe/greedy_ref.cpp (a libllama driver: llama_decode + "
            "argmax, logprob = logit - logsumexp in double), 2 threads, F32 K/V cache, flash "
            "attention off, n_ctx = the model's, prompts = prompt_ids of "
            "reference/moe/qwen3moe.greedy.json, 64 tokens",
    "files": "olmo2.gguf: tensor data FNV-1a 64 f7443b48190748f9 (tests/data/moe/gguf_checksum.c; "
             "asserted by olmo2_parity_test.cc)",
    "n_predict": full["n_predict"],
}
cases = []
for c in full["cases"]:
    steps = [
        json.dumps({"id": s["id"], "logprob": round(s["logprob"], 9),
                    "gap": round(s["top"][0][1] - s["top"][1][1], 6)}, separators=(",", ":"))
        for s in c["steps"]
    ]
    front = json.dumps({"prompt": c["prompt"], "prompt_ids": c["prompt_ids"],
                        "generated_ids": c["generated_ids"]}, separators=(",", ":"))
    cases.append(front[:-1] + ',"steps":[\n' + ",\n".join(steps) + "]}")
out = json.dumps(head, separators=(",", ":"))[:-1] + ',"cases":[' + ",".join(cases) + "]}\n"
json.loads(out)  # well-formed
open(sys.argv[2], "w").write(out)
