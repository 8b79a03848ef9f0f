"""Ranks a GGUF model's tokens by their count in a corpus built from --roots
(see rank.sh): one token string a line, most frequent first, tokens never
seen left out."""
import argparse, collections, hashlib, json, os, subprocess, sys

import gguf

LANGS = {
    'python': ('.py',), 'rust': ('.rs',), 'c': ('.c', '.h'), 'javascript': ('.js', '.mjs'),
    'typescript': ('.ts',), 'go': ('.go',), 'java': ('.java',), 'sql': ('.sql',),
    'bash': ('.sh', '.bash'), 'english': ('.md', '.txt', '.rst'),
}
BUDGET = 3_000_000  # characters a language
CHUNK = 32_000  # characters a `mlxr tokenize` call (an argument holds 128 KiB)


def corpus(roots):
    files = {lang: [] for lang in LANGS}
    for root in roots:
        for d, _, names in os.walk(root):
            for name in names:
                for lang, exts in LANGS.items():
                    if name.endswith(exts):
                        files[lang].append(os.path.join(d, name))
    for lang, paths in files.items():
        # A fixed pseudo-random order: the same files whatever the walk order.
        paths.sort(key=lambda p: hashlib.sha1(p.encode()).hexdigest())
        taken = 0
        for path in paths:
            try:
                text = open(path, encoding='utf-8').read()
            except (OSError, UnicodeDecodeError):
                continue
            if not 200 <= len(text) <= 200_000:
                continue
            yield text
            taken += len(text)
            if taken >= BUDGET:
                break
        print(f'{lang}: {taken} characters of {len(paths)} files', file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--mlxr', required=True)
    ap.add_argument('--model', required=True)
    ap.add_argument('--roots', nargs='+', required=True)
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    counts = collections.Counter()
    text = '\n'.join(corpus(args.roots))
    for i in range(0, len(text), CHUNK):
        out = subprocess.run([args.mlxr, 'tokenize', '-m', args.model, '--', text[i:i + CHUNK]],
                             capture_output=True, text=True, check=True).stdout
        counts.update(json.loads(out))
    field = gguf.GGUFReader(args.model).fields['tokenizer.ggml.tokens']
    strings = [bytes(field.parts[i]).decode() for i in field.data]
    ranked = [strings[t] for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    ranked = [s for s in ranked if '\n' not in s and '\r' not in s]
    with open(args.out, 'w', encoding='utf-8') as f:
        f.write(''.join(s + '\n' for s in ranked))
    print(f'{sum(counts.values())} tokens, {len(ranked)} distinct -> {args.out}', file=sys.stderr)


if __name__ == '__main__':
    main()
