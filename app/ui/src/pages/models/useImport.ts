import { useRef, useState } from "react";
import { client, describe, isAbort } from "../../api/client";
import { sha256File } from "../../lib/sha256File";

export type ImportState =
  | { phase: "idle" }
  | { phase: "hashing" | "uploading"; done: number; total: number }
  | { phase: "creating" }
  | { phase: "done"; model: string }
  | { phase: "cancelled"; model: string }
  | { phase: "failed"; model: string; error: string };

/**
 * A GGUF file of this computer as a model of the daemon: its SHA-256
 * computed here (streaming), the bytes uploaded as that blob unless the
 * daemon has it, then `/api/create` with `files`. `cancel` stops any step.
 */
export function useImport(onImported: () => void) {
  const [state, setState] = useState<ImportState>({ phase: "idle" });
  const controller = useRef<AbortController | null>(null);

  const run = async (file: File, model: string) => {
    const abort = new AbortController();
    controller.current = abort;
    const { signal } = abort;
    try {
      const digest = await sha256File(file, (done, total) => setState({ phase: "hashing", done, total }), signal);
      const daemon = client();
      if (!(await daemon.hasBlob(digest))) {
        setState({ phase: "uploading", done: 0, total: file.size });
        await daemon.pushBlob(digest, file, { signal, onProgress: (done, total) => setState({ phase: "uploading", done, total }) });
      }
      setState({ phase: "creating" });
      await daemon.create({ model, files: { [file.name]: digest }, signal });
      setState({ phase: "done", model });
      onImported();
    } catch (e) {
      setState(isAbort(e) ? { phase: "cancelled", model } : { phase: "failed", model, error: describe(e) });
    } finally {
      controller.current = null;
    }
  };
  const cancel = () => controller.current?.abort();
  const busy = state.phase === "hashing" || state.phase === "uploading" || state.phase === "creating";
  return { state, busy, run, cancel };
}
