/** Cosine similarity of two vectors (0 when either is all zeros or lengths differ). */
export function cosine(a: number[], b: number[]): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na > 0 && nb > 0 ? dot / Math.sqrt(na * nb) : 0;
}

/** The symmetric matrix of pairwise cosine similarities. */
export function cosineMatrix(vectors: number[][]): number[][] {
  return vectors.map((a) => vectors.map((b) => cosine(a, b)));
}

/** How a logprob token is shown: spaces as "·", newlines as "↵", tabs as "→". */
export function visibleToken(token: string): string {
  return token.replace(/ /g, "·").replace(/\n/g, "↵").replace(/\t/g, "→") || "∅";
}

/** The alternatives of one step, most likely first. */
export function rankAlternatives(top: Record<string, number> | undefined): [string, number][] {
  return Object.entries(top ?? {}).sort((a, b) => b[1] - a[1]);
}
