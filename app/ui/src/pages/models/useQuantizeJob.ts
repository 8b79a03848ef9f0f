import { useEffect, useRef, useState } from "react";
import { describe } from "../../api/client";
import { cancelJob, getJob, startQuantizeJob, type Job } from "../../api/mlxr";

/** How often a running job is asked for its progress. */
const POLL_MS = 250;

export type QuantizeState = { phase: "idle" } | { phase: "job"; job: Job } | { phase: "failed"; error: string };

/** A quantize job of the daemon, followed until it ends; `onSuccess` once the new model is registered. */
export function useQuantizeJob(onSuccess: () => void) {
  const [state, setState] = useState<QuantizeState>({ phase: "idle" });
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => void (timer.current && clearTimeout(timer.current)), []);

  const follow = (job: Job) => {
    setState({ phase: "job", job });
    if (job.status === "success") onSuccess();
    if (job.status !== "running" && job.status !== "registering") return;
    timer.current = setTimeout(() => {
      getJob(job.id).then(follow, (e: unknown) => setState({ phase: "failed", error: describe(e) }));
    }, POLL_MS);
  };
  const start = async (request: { model: string; from: string; quantize: string }) => {
    try {
      follow(await startQuantizeJob(request));
    } catch (e) {
      setState({ phase: "failed", error: describe(e) });
    }
  };
  const cancel = async (id: string) => {
    if (timer.current) clearTimeout(timer.current);
    try {
      setState({ phase: "job", job: await cancelJob(id) });
    } catch (e) {
      setState({ phase: "failed", error: describe(e) });
    }
  };
  return { state, start, cancel };
}
