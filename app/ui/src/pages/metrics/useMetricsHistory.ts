import { useEffect, useState } from "react";
import { apiFetch, describe } from "../../api/client";
import { parsePrometheus } from "../../api/prometheus";
import type { Snapshot } from "./derive";

/** How many scrapes the charts keep (2 minutes at 2 s). */
export const HISTORY = 60;

/** Scrapes GET /metrics every `intervalMs`, keeping the last HISTORY + 1 snapshots. */
export function useMetricsHistory(intervalMs = 2000) {
  const [snapshots, setSnapshots] = useState<Snapshot[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const scrape = async () => {
      try {
        const text = await (await apiFetch("/metrics")).text();
        if (!live) return;
        const snapshot = { t: Date.now(), samples: parsePrometheus(text) };
        setSnapshots((old) => [...old, snapshot].slice(-(HISTORY + 1)));
        setError(null);
      } catch (e) {
        if (live) setError(describe(e));
      }
      if (live) timer = setTimeout(() => void scrape(), intervalMs);
    };
    void scrape();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [intervalMs]);
  return { snapshots, error };
}
