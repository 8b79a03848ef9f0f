import { useRef, useState } from "react";
import { describe, isAbort } from "../../api/client";
import { streamPull, type PullProgress } from "../../api/ollama";

export type PullState =
  | { phase: "idle" }
  | { phase: "pulling"; model: string; progress: PullProgress | null }
  | { phase: "done"; model: string }
  | { phase: "cancelled"; model: string }
  | { phase: "failed"; model: string; error: string };

/** A pull with live progress (POST /api/pull NDJSON); `cancel` aborts the fetch, which stops the pull. */
export function usePull(onSuccess: () => void) {
  const [state, setState] = useState<PullState>({ phase: "idle" });
  const controller = useRef<AbortController | null>(null);

  const pull = async (model: string) => {
    const abort = new AbortController();
    controller.current = abort;
    setState({ phase: "pulling", model, progress: null });
    try {
      for await (const progress of await streamPull(model, abort.signal)) {
        setState({ phase: "pulling", model, progress });
      }
      setState({ phase: "done", model });
      onSuccess();
    } catch (e) {
      setState(isAbort(e) ? { phase: "cancelled", model } : { phase: "failed", model, error: describe(e) });
    } finally {
      controller.current = null;
    }
  };
  const cancel = () => controller.current?.abort();

  return { state, pull, cancel };
}
