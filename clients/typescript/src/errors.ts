/**
 * Typed errors. Every refusal of the server carries its error envelope:
 * `{"error": "<human message>", "code": "<machine code>", "details": {...}}`. The classes mirror the Python
 * client's (`memoryplatform_client.errors`), name for name.
 */

/** Base of every error this client throws. */
export class MemoryPlatformError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The server could not be reached, or the connection broke or timed out (after the retries). */
export class APIConnectionError extends MemoryPlatformError {}

export interface APIErrorInit {
  status: number;
  code: string;
  details?: Record<string, unknown>;
  retryAfter?: number | null;
}

/** The server answered with an error: `status`, and the envelope's `code`, `error` and `details`. */
export class APIError extends MemoryPlatformError {
  readonly error: string;
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>;
  /** `Retry-After` in seconds, when the server sent one. */
  readonly retryAfter: number | null;

  constructor(error: string, init: APIErrorInit) {
    super(`${init.status} ${init.code}: ${error}`);
    this.error = error;
    this.status = init.status;
    this.code = init.code;
    this.details = init.details ?? {};
    this.retryAfter = init.retryAfter ?? null;
  }
}

/** 400 `bad_request` (bad input, a guardrail) and other 4xx without a class of their own. */
export class BadRequestError extends APIError {}

/**
 * A query (`q`) longer than {@link MAX_QUERY_CHARS}, refused before it is sent: the 400 `bad_request` the
 * server would answer (`details`: the limit and the query's length).
 */
export class QueryTooLongError extends BadRequestError {
  constructor(length: number, limit: number) {
    super(`q is ${length} characters; a query may have at most ${limit}.`, {
      status: 400,
      code: "bad_request",
      details: { limit: "MAX_QUERY_CHARS", max: limit, length },
    });
  }
}

/** 401 `unauthorized`: a missing, unknown, revoked or expired key. */
export class AuthenticationError extends APIError {}

/** 403 `forbidden`: the key's role or agent may not do this. */
export class PermissionDeniedError extends APIError {}

/** 404 `not_found`. */
export class NotFoundError extends APIError {}

/** 409 `conflict`. */
export class ConflictError extends APIError {}

/** 409 `capacity`: the user's memory cap is reached. */
export class CapacityError extends ConflictError {}

/** 413 `payload_too_large`. */
export class PayloadTooLargeError extends APIError {}

/** 429 `rate_limited` (writes per turn). */
export class RateLimitedError extends APIError {}

/** 5xx `server_error`. */
export class ServerError extends APIError {}

/** 503 `unavailable`: retry later (`retryAfter` seconds). */
export class UnavailableError extends ServerError {}

type APIErrorClass = new (error: string, init: APIErrorInit) => APIError;

const BY_STATUS: Record<number, APIErrorClass> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitedError,
  503: UnavailableError,
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The error for an error answer: its envelope when it has one, else the status and the raw text. */
export function errorFor(args: {
  status: number;
  body: unknown;
  text?: string;
  retryAfter?: number | null;
}): APIError {
  const { status, body } = args;
  let message: string;
  let code = "";
  let details: Record<string, unknown> = {};
  if (isRecord(body) && typeof body.error === "string") {
    message = body.error;
    code = typeof body.code === "string" ? body.code : "";
    details = isRecord(body.details) ? body.details : {};
  } else {
    message = (args.text ?? "").trim().slice(0, 500) || `HTTP ${status}`;
  }
  if (!code) code = status >= 500 ? "server_error" : "bad_request";
  const cls: APIErrorClass =
    code === "capacity" ? CapacityError : (BY_STATUS[status] ?? (status >= 500 ? ServerError : BadRequestError));
  return new cls(message, { status, code, details, retryAfter: args.retryAfter ?? null });
}
