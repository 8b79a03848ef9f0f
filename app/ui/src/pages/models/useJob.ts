import { useEffect, useRef, useState } from "react";
import type { Job, JobRequest } from "mlxr";
import { client, describe } from "../../api/client";

/** How often a running job is asked for its progress. */
const POLL_MS = 250;

export type JobState = { phase: "idle" } | { phase: "job"; job: Job } | { phase: "failed"; error: string };

/** A job of the daemon (a quantize or a convert), followed until it ends; `onSuccess` once the new model is registered. */
export function useJob(onSuccess: () => void) {
  const [state, setState] = useState<JobState>({ phase: "idle" });
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => void (timer.current && clearTimeout(timer.current)), []);

  const follow = (job: Job) => {
    setState({ phase: "job", job });
    if (job.status === "success") onSuccess();
    if (job.status !== "running" && job.status !== "registering") return;
    timer.current = setTimeout(() => {
      client()
        .getJob(job.id)
        .then(follow, (e: unknown) => setState({ phase: "failed", error: describe(e) }));
    }, POLL_MS);
  };
  const start = async (request: JobRequest) => {
    try {
      follow(await client().startJob(request));
    } catch (e) {
      setState({ phase: "failed", error: describe(e) });
    }
  };
  const cancel = async (id: string) => {
    if (timer.current) clearTimeout(timer.current);
    try {
      setState({ phase: "job", job: await client().cancelJob(id) });
    } catch (e) {
      setState({ phase: "failed", error: describe(e) });
    }
  };
  const job = state.phase === "job" ? state.job : null;
  const running = job?.status === "running" || job?.status === "registering";
  return { state, job, running, start, cancel };
}
