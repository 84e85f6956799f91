import { Client, QueryConfig } from 'pg';

/** What `pg` was asked to run: the text, and the prepared statement's name if it has one. */
export interface SentStatement {
  text: string;
  name?: string;
}

/**
 * Every statement sent to the database (transaction control included) while `work` runs, as
 * the `pg` client is given it: through TypeORM or on the pool itself (`pooledRows`).
 */
export async function sentStatementsOf(work: () => Promise<unknown>): Promise<SentStatement[]> {
  const sent: SentStatement[] = [];
  const original = Client.prototype.query;
  const spy = jest.spyOn(Client.prototype, 'query').mockImplementation(function (
    this: Client,
    ...args: unknown[]
  ) {
    const first = args[0] as string | QueryConfig;
    sent.push(typeof first === 'string' ? { text: first } : { text: first.text, name: first.name });
    return (original as (...a: unknown[]) => unknown).apply(this, args) as never;
  });
  try {
    await work();
  } finally {
    spy.mockRestore();
  }
  return sent;
}

/** Every statement's text sent to the database (transaction control included) while `work` runs. */
export async function statementsOf(work: () => Promise<unknown>): Promise<string[]> {
  return (await sentStatementsOf(work)).map((s) => s.text);
}
