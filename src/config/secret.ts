import { inspect } from 'node:util';

/**
 * A value that must never reach a log, an error message or a JSON answer. `reveal()` is the
 * only way to read it; everything that stringifies it sees `[redacted]`.
 */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return '[redacted]';
  }

  toJSON(): string {
    return '[redacted]';
  }

  [inspect.custom](): string {
    return 'Secret([redacted])';
  }
}
