/**
 * Build logs on JetStream: one subject per build in `BUILD_LOGS`, one message per line, and a last,
 * empty message with `BUILD_LOG_END_HEADER`. A reader gets the lines so far, or follows them as they are
 * written until the end marker (the SSE stream of the management API).
 */
import { DeliverPolicy, type JetStreamClient } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { BUILD_LOG_END_HEADER, BUILD_LOGS_STREAM, buildLogSubject } from '../shared/contracts/builds.ts';

/** A longer line is cut (pip and compilers can print very long lines). */
export const BUILD_LOG_MAX_LINE_BYTES = 8 * 1024;

export interface BuildLogWriter {
  line(text: string): void;
  /** Flushes what was written and adds the end marker. */
  end(): Promise<void>;
}

export interface BuildLogLine {
  /** 1-based position in the build's log (the SSE event id). */
  seq: number;
  text: string;
}

export interface BuildLogs {
  writer(projectId: string, appName: string, buildId: string): BuildLogWriter;
  /** The lines written so far, and whether the log is complete. */
  read(
    projectId: string,
    appName: string,
    buildId: string,
  ): Promise<{ lines: BuildLogLine[]; complete: boolean }>;
  /** Every line from `after` (exclusive) on, as written, until the end marker or `signal`. */
  follow(
    projectId: string,
    appName: string,
    buildId: string,
    opts: { after?: number; signal: AbortSignal },
  ): AsyncIterable<BuildLogLine>;
}

const cut = (text: string) => {
  const b = Buffer.from(text, 'utf8');
  return b.length <= BUILD_LOG_MAX_LINE_BYTES
    ? text
    : `${b.subarray(0, BUILD_LOG_MAX_LINE_BYTES).toString('utf8')}…`;
};

export function createBuildLogs(js: JetStreamClient): BuildLogs {
  return {
    writer(projectId, appName, buildId) {
      const subject = buildLogSubject(projectId, appName, buildId);
      // Lines are published in order, one at a time; a failed publish is dropped, never the build.
      let chain: Promise<unknown> = Promise.resolve();
      return {
        line(text) {
          chain = chain.then(() => js.publish(subject, cut(text)).catch(() => undefined));
        },
        async end() {
          const h = natsHeaders();
          h.set(BUILD_LOG_END_HEADER, '1');
          chain = chain.then(() => js.publish(subject, '', { headers: h }).catch(() => undefined));
          await chain;
        },
      };
    },

    async read(projectId, appName, buildId) {
      const subject = buildLogSubject(projectId, appName, buildId);
      const consumer = await js.consumers.get(BUILD_LOGS_STREAM, {
        filter_subjects: subject,
        deliver_policy: DeliverPolicy.All,
      });
      const lines: BuildLogLine[] = [];
      let complete = false;
      if ((await consumer.info(true)).num_pending === 0) {
        await consumer.delete().catch(() => undefined);
        return { lines, complete };
      }
      const messages = await consumer.consume();
      for await (const m of messages) {
        if (m.headers?.get(BUILD_LOG_END_HEADER)) complete = true;
        else lines.push({ seq: lines.length + 1, text: m.string() });
        if (m.info.pending === 0) break;
      }
      await messages.close().catch(() => undefined);
      return { lines, complete };
    },

    follow(projectId, appName, buildId, opts) {
      const subject = buildLogSubject(projectId, appName, buildId);
      return {
        async *[Symbol.asyncIterator]() {
          const consumer = await js.consumers.get(BUILD_LOGS_STREAM, {
            filter_subjects: subject,
            deliver_policy: DeliverPolicy.All,
          });
          const messages = await consumer.consume();
          const stop = () => void messages.close().catch(() => undefined);
          opts.signal.addEventListener('abort', stop, { once: true });
          if (opts.signal.aborted) stop();
          let seq = 0;
          try {
            for await (const m of messages) {
              if (m.headers?.get(BUILD_LOG_END_HEADER)) break;
              seq++;
              if (seq > (opts.after ?? 0)) yield { seq, text: m.string() };
            }
          } finally {
            opts.signal.removeEventListener('abort', stop);
            stop();
          }
        },
      };
    },
  };
}
