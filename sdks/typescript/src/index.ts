/** MLXR's TypeScript SDK: a client of the `mlxr serve` daemon's REST API. */
export { Client, DEFAULT_HOST } from "./client.js";
export type { ClientOptions } from "./client.js";
export { ResponseError } from "./errors.js";
export { LineSplitter, readNdjson } from "./ndjson.js";
export { SseParser, readSse } from "./sse.js";
export type { SseEvent } from "./sse.js";
export type * from "./types.js";
