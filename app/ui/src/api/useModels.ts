import { useCallback, useEffect, useState } from "react";
import { describe } from "./client";
import { listModels, type ModelSummary } from "./ollama";

/** The installed models (GET /api/tags); `reload` fetches them again. */
export function useModels() {
  const [models, setModels] = useState<ModelSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const reload = useCallback(async () => {
    try {
      setModels(await listModels());
      setError(null);
    } catch (e) {
      setError(describe(e));
    }
  }, []);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { models, error, reload };
}
