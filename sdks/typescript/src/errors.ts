/**
 * The daemon refused or failed a request. `statusCode` is the HTTP status
 * (404 unknown model, 400 bad option, 401 API key, 403 pull source not
 * allowed, ...), or -1 for an error the daemon sent inside a stream that had
 * already started (a failed download); `message` is the daemon's own.
 */
export class ResponseError extends Error {
  override readonly name = "ResponseError";

  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }

  /** The message, under the name the `ollama` packages use. */
  get error(): string {
    return this.message;
  }
}
