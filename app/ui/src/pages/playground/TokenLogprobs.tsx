import { useState, type CSSProperties } from "react";
import type { CompletionLogprobs } from "../../api/openai";
import { rankAlternatives, visibleToken } from "./cosine";

/**
 * The generated tokens, each with its logprob; hovering or focusing one
 * (Tab / arrow keys) shows the most likely alternatives at that step.
 */
export function TokenLogprobs({ logprobs }: { logprobs: CompletionLogprobs }) {
  const [active, setActive] = useState<number | null>(null);
  const { tokens, token_logprobs: values, top_logprobs: tops } = logprobs;
  const focusToken = (i: number) => {
    const next = Math.max(0, Math.min(tokens.length - 1, i));
    document.getElementById(`token-${next}`)?.focus();
  };
  const shown = active ?? null;
  const alternatives = shown === null ? [] : rankAlternatives(tops[shown]);
  return (
    <div className="logprobs">
      <ol className="tokens" aria-label="Generated tokens with logprobs">
        {tokens.map((token, i) => {
          const lp = values[i] ?? 0;
          const p = Math.exp(lp);
          return (
            <li key={i}>
              <button
                type="button"
                id={`token-${i}`}
                className="token"
                aria-label={`Token ${JSON.stringify(token)}, logprob ${lp.toFixed(3)}`}
                aria-pressed={shown === i}
                style={{ "--p": p.toFixed(3) } as CSSProperties}
                onMouseEnter={() => setActive(i)}
                onFocus={() => setActive(i)}
                onKeyDown={(e) => {
                  if (e.key === "ArrowRight") focusToken(i + 1);
                  else if (e.key === "ArrowLeft") focusToken(i - 1);
                  else return;
                  e.preventDefault();
                }}
              >
                <span className="token-text">{visibleToken(token)}</span>
                <span className="token-lp">{lp.toFixed(2)}</span>
              </button>
            </li>
          );
        })}
      </ol>
      <section className="alternatives" aria-label="Token alternatives" aria-live="polite">
        {shown === null ? (
          <p className="note">Hover over or focus a token to see the alternatives the model considered.</p>
        ) : (
          <>
            <h3>
              Step {shown + 1}: <code>{visibleToken(tokens[shown] ?? "")}</code>
            </h3>
            <table>
              <thead>
                <tr>
                  <th scope="col">Token</th>
                  <th scope="col">Logprob</th>
                  <th scope="col">Probability</th>
                </tr>
              </thead>
              <tbody>
                {alternatives.map(([token, lp]) => (
                  <tr key={token} className={token === tokens[shown] ? "chosen" : undefined}>
                    <th scope="row">
                      <code>{visibleToken(token)}</code>
                    </th>
                    <td>{lp.toFixed(3)}</td>
                    <td>
                      <span className="bar-track" aria-hidden="true">
                        <span className="bar" style={{ width: `${(Math.exp(lp) * 100).toFixed(1)}%` }} />
                      </span>
                      {(Math.exp(lp) * 100).toFixed(1)} %
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </>
        )}
      </section>
    </div>
  );
}
