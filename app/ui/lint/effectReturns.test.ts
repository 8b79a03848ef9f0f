import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { findEffectReturns, formatFinding } from "./effectReturns";

const find = (code: string) => findEffectReturns(code, "x.tsx").map((f) => `${f.line}:${f.column} ${f.message}`);

describe("effect callbacks that return a value", () => {
  it("are found in every effect hook, plain or through React.", () => {
    const code = [
      'useEffect(() => bottom.current?.scrollIntoView?.({ block: "end" }), [draft]);',
      "useLayoutEffect(() => setValue(current), [current]);",
      "React.useInsertionEffect(() => (injected = true));",
      "useEffect(async () => { await load(); }, []);",
      "useEffect(async function () { await load(); });",
    ].join("\n");
    const found = find(code);
    expect(found).toHaveLength(5);
    expect(found[0]).toMatch(/^1:1 useEffect: the effect returns the value of `bottom\.current\?\.scrollIntoView\?\.\(\{ block: "end" \}\)`/);
    expect(found[1]).toMatch(/^2:1 useLayoutEffect: .*`setValue\(current\)`/);
    expect(found[2]).toMatch(/^3:1 useInsertionEffect: /);
    expect(found[3]).toMatch(/^4:1 useEffect: an async effect returns a Promise/);
    expect(found[4]).toMatch(/^5:1 useEffect: an async effect/);
  });

  it("are found inside components written in TSX", () => {
    const code = `export function Page({ n }: { n: number }) {\n  useEffect(() => ref.current!.focus(), [n]);\n  return <div ref={ref}>{n}</div>;\n}\n`;
    expect(find(code)).toEqual([expect.stringMatching(/^2:3 useEffect: .*`ref\.current!\.focus\(\)`/)]);
  });

  it("leave block bodies, returned cleanups and other hooks alone", () => {
    const code = [
      'useEffect(() => { bottom.current?.scrollIntoView?.({ block: "end" }); }, [draft]);',
      "useEffect(() => { const t = setInterval(tick, 1000); return () => clearInterval(t); }, []);",
      "useEffect(() => () => abort.abort(), []);",
      "useEffect(function () { return () => undefined; });",
      "useMemo(() => compute(x), [x]);",
      "useCallback(() => send(text), [text]);",
    ].join("\n");
    expect(find(code)).toEqual([]);
  });

  it("are nowhere in the app", () => {
    const sources = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? sources(join(dir, e.name)) : /\.tsx?$/.test(e.name) ? [join(dir, e.name)] : [],
      );
    const root = join(import.meta.dirname, "..", "src");
    const files = sources(root);
    expect(files.length).toBeGreaterThan(20);
    const found = files.flatMap((f) => findEffectReturns(readFileSync(f, "utf8"), f)).map(formatFinding);
    expect(found).toEqual([]);
  });
});
