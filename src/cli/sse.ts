/** Server-sent events from a fetch body, yielded as each one completes (eventsource-parser). */
import { createParser, type EventSourceMessage } from 'eventsource-parser';

export type { EventSourceMessage };

export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<EventSourceMessage> {
  const ready: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => ready.push(e) });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (ready.length > 0) yield ready.shift() as EventSourceMessage;
  }
  parser.feed(decoder.decode());
  while (ready.length > 0) yield ready.shift() as EventSourceMessage;
}
