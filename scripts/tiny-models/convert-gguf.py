#!/usr/bin/env python3
"""Run llama.cpp's convert_hf_to_gguf.py unmodified, with one override.

Usage: convert-gguf.py LLAMA_CPP_DIR PRE_TOKENIZER -- <convert_hf_to_gguf.py args>

The converter identifies a BPE pre-tokenizer by hashing the ids its test string encodes to
(get_vocab_base_pre); our freshly trained 384-token tokenizer has no known hash, and the converter
has no command-line override, so it raises "BPE pre-tokenizer was not recognized". This wrapper
imports the vendored `conversion` package, wraps TextModel.get_vocab_base_pre so that an unknown
hash yields PRE_TOKENIZER (our tokenizer uses Qwen2's split regex, i.e. llama.cpp's "qwen2"), and
then runs the vendored convert_hf_to_gguf.py as __main__. The vendored files are not edited.

Second override: Gemma2Model.set_vocab reads only tokenizer.model (SentencePiece), which our BPE tokenizer
has no counterpart of; without that file it falls back to tokenizer.json the way the converter's own
Gemma3Model.set_vocab does (_set_vocab_gpt2).
"""
import runpy
import sys
from pathlib import Path

llama_cpp, pre = Path(sys.argv[1]), sys.argv[2]
assert sys.argv[3] == "--"
sys.path.insert(0, str(llama_cpp))
sys.path.insert(1, str(llama_cpp / "gguf-py"))

from conversion import base  # noqa: E402

_orig = base.TextModel.get_vocab_base_pre


def get_vocab_base_pre(self, tokenizer):
    try:
        return _orig(self, tokenizer)
    except NotImplementedError:
        print(f"convert-gguf.py: unknown pre-tokenizer hash, using tokenizer.ggml.pre = {pre!r}", file=sys.stderr)
        return pre


base.TextModel.get_vocab_base_pre = get_vocab_base_pre

from conversion import gemma  # noqa: E402

_gemma2_set_vocab = gemma.Gemma2Model.set_vocab


def gemma2_set_vocab(self):
    if (self.dir_model / "tokenizer.model").is_file():
        return _gemma2_set_vocab(self)
    print("convert-gguf.py: Gemma 2 without tokenizer.model, vocabulary from tokenizer.json", file=sys.stderr)
    self._set_vocab_gpt2()


gemma.Gemma2Model.set_vocab = gemma2_set_vocab
sys.argv = [str(llama_cpp / "convert_hf_to_gguf.py")] + sys.argv[4:]
runpy.run_path(sys.argv[0], run_name="__main__")
