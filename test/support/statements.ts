import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';

/** Every statement sent to the database (transaction control included) while `work` runs. */
export async function statementsOf(work: () => Promise<unknown>): Promise<string[]> {
  const sent: string[] = [];
  const original = PostgresQueryRunner.prototype.query;
  const spy = jest.spyOn(PostgresQueryRunner.prototype, 'query').mockImplementation(function (
    this: PostgresQueryRunner,
    ...args
  ) {
    sent.push(String(args[0]));
    return original.apply(this, args);
  });
  try {
    await work();
  } finally {
    spy.mockRestore();
  }
  return sent;
}
