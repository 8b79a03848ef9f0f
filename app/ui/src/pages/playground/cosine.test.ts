import { describe, expect, it } from "vitest";
import { cosine, cosineMatrix, rankAlternatives, visibleToken } from "./cosine";

describe("playground helpers", () => {
  it("computes cosine similarity", () => {
    expect(cosine([1, 0], [1, 0])).toBeCloseTo(1);
    expect(cosine([1, 0], [0, 2])).toBeCloseTo(0);
    expect(cosine([1, 1], [-1, -1])).toBeCloseTo(-1);
    expect(cosine([0, 0], [1, 1])).toBe(0);
    expect(cosine([1], [1, 2])).toBe(0);
    const m = cosineMatrix([
      [1, 0],
      [0.6, 0.8],
    ]);
    expect(m[0]?.[1]).toBeCloseTo(0.6);
    expect(m[1]?.[0]).toBeCloseTo(0.6);
    expect(m[1]?.[1]).toBeCloseTo(1);
  });

  it("shows whitespace in tokens and ranks alternatives", () => {
    expect(visibleToken(" a\n\tb")).toBe("·a↵→b");
    expect(visibleToken("")).toBe("∅");
    expect(rankAlternatives({ a: -2, b: -0.1, c: -1 })).toEqual([
      ["b", -0.1],
      ["c", -1],
      ["a", -2],
    ]);
    expect(rankAlternatives(undefined)).toEqual([]);
  });
});
