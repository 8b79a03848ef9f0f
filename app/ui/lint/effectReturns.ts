// React calls whatever an effect callback returns as its cleanup. An effect
// written as an arrow with an expression body returns that expression's
// value: harmless while it is `undefined`, a crash ("destroy is not a
// function") as soon as a browser API starts returning something — Chromium
// 156's scroll methods return Promises. TypeScript cannot catch it (a
// function returning anything is assignable to one returning `void`), so
// this check runs on every module Vite builds, tests or serves.
import { parseAst, type Plugin } from "vite";

const EFFECT_HOOKS = new Set(["useEffect", "useLayoutEffect", "useInsertionEffect"]);

export interface Finding {
  file: string;
  line: number;
  column: number;
  message: string;
}

type Node = { type: string; start: number; end: number; [key: string]: unknown };

function isNode(value: unknown): value is Node {
  return typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string";
}

function hookName(callee: Node): string | null {
  if (callee.type === "Identifier") return callee.name as string;
  if (callee.type === "MemberExpression" && isNode(callee.property) && callee.property.type === "Identifier") {
    return callee.property.name as string;
  }
  return null;
}

function unparenthesized(node: Node): Node {
  return node.type === "ParenthesizedExpression" && isNode(node.expression) ? unparenthesized(node.expression) : node;
}

const isFunction = (node: Node) => node.type === "ArrowFunctionExpression" || node.type === "FunctionExpression";

/** Why the effect callback `fn` returns a value that is not a cleanup function, or null when it does not. */
function problem(fn: Node, code: string): string | null {
  if (!isFunction(fn)) return null;
  if (fn.async) return "an async effect returns a Promise, which React would call as its cleanup; call an async function inside a block body instead";
  if (fn.type !== "ArrowFunctionExpression" || !fn.expression || !isNode(fn.body)) return null;
  if (isFunction(unparenthesized(fn.body))) return null; // `() => () => cleanup()` returns a cleanup
  const expr = code.slice(fn.body.start, fn.body.end).replace(/\s+/g, " ");
  const shown = expr.length > 60 ? `${expr.slice(0, 57)}...` : expr;
  return `the effect returns the value of \`${shown}\`, which React calls as its cleanup; write a block body: \`() => { ${shown}; }\``;
}

function langOf(file: string): "ts" | "tsx" | "js" | "jsx" {
  const ext = /\.([cm]?)([jt]sx?)$/.exec(file)?.[2];
  return ext === "ts" || ext === "js" || ext === "jsx" ? ext : "tsx";
}

/** Every effect callback in `code` (TypeScript/JSX source of `file`) that returns something other than a cleanup. */
export function findEffectReturns(code: string, file: string): Finding[] {
  const findings: Finding[] = [];
  const visit = (value: unknown) => {
    if (Array.isArray(value)) {
      value.forEach(visit);
      return;
    }
    if (!isNode(value)) return;
    if (value.type === "CallExpression" && isNode(value.callee)) {
      const name = hookName(value.callee);
      const [callback] = value.arguments as unknown[];
      const why = name && EFFECT_HOOKS.has(name) && isNode(callback) ? problem(callback, code) : null;
      if (why) {
        const before = code.slice(0, value.start).split("\n");
        findings.push({ file, line: before.length, column: before.at(-1)!.length + 1, message: `${name}: ${why}` });
      }
    }
    for (const key in value) if (key !== "type") visit(value[key]);
  };
  visit(parseAst(code, { lang: langOf(file) }, file));
  return findings;
}

export const formatFinding = (f: Finding) => `${f.file}:${f.line}:${f.column}: ${f.message}`;

/** Fails the build (and Vitest, and the dev server's overlay) on effect callbacks that return a value. */
export function effectReturns(): Plugin {
  return {
    name: "mlxr:effect-returns",
    enforce: "pre",
    transform(code, id) {
      const file = id.split("?")[0]!;
      if (file.includes("/node_modules/") || !/\.[cm]?[jt]sx?$/.test(file)) return null;
      const findings = findEffectReturns(code, file);
      if (findings.length) this.error(findings.map(formatFinding).join("\n"));
      return null;
    },
  };
}
