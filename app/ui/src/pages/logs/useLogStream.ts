import { useCallback, useEffect, useRef, useState } from "react";
import { describe, isAbort } from "../../api/client";
import { followLogs, type LogLine } from "../../api/mlxr";
import { useApiKey } from "../../lib/apiKey";

/** Lines kept in the page; older ones drop off. */
export const MAX_LINES = 1000;
const TAIL = 200;
const RETRY_MS = 3000;

export type Status = "connecting" | "live" | "error";

/**
 * Follows the daemon's log: `lines` (the last MAX_LINES shown), live unless
 * `paused` — then new lines wait in `held` until resumed. Reconnects after
 * an error, asking for the tail again (lines already shown are skipped by seq).
 */
export function useLogStream(paused: boolean) {
  const apiKey = useApiKey();
  const [lines, setLines] = useState<LogLine[]>([]);
  const [held, setHeld] = useState(0);
  const [skipped, setSkipped] = useState(0);
  const [status, setStatus] = useState<Status>("connecting");
  const [error, setError] = useState<string | null>(null);
  const pending = useRef<LogLine[]>([]);
  const lastSeq = useRef(0);
  const pausedRef = useRef(paused);

  const flush = useCallback(() => {
    const add = pending.current;
    pending.current = [];
    setHeld(0);
    if (add.length) setLines((old) => [...old, ...add].slice(-MAX_LINES));
  }, []);

  useEffect(() => {
    pausedRef.current = paused;
    if (!paused) flush();
  }, [paused, flush]);

  useEffect(() => {
    const abort = new AbortController();
    let retry: ReturnType<typeof setTimeout> | undefined;
    const connect = async () => {
      setStatus("connecting");
      try {
        const items = await followLogs(TAIL, abort.signal);
        for await (const item of items) {
          setStatus("live");
          setError(null);
          if (item.kind === "skipped") {
            setSkipped((n) => n + item.count);
            continue;
          }
          if (item.line.seq <= lastSeq.current) continue;
          lastSeq.current = item.line.seq;
          pending.current.push(item.line);
          if (pausedRef.current) setHeld(pending.current.length);
          else flush();
        }
        if (!abort.signal.aborted) throw new Error("the daemon closed the log stream");
      } catch (e) {
        if (isAbort(e) || abort.signal.aborted) return;
        setStatus("error");
        setError(`${describe(e)} — retrying in ${RETRY_MS / 1000} s`);
        retry = setTimeout(() => void connect(), RETRY_MS);
      }
    };
    void connect();
    return () => {
      abort.abort();
      clearTimeout(retry);
    };
  }, [apiKey, flush]);

  const clear = useCallback(() => {
    pending.current = [];
    setHeld(0);
    setLines([]);
  }, []);

  return { lines, held, skipped, status, error, clear };
}
