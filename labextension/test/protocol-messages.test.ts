/**
 * The example of every comm message (`protocol-messages.json`, which the kernel's
 * tests/kernel/test_protocol.py validates against its types) read by the extension: each
 * kernel message parses back to itself (no key dropped, none defaulted), each notification
 * payload in them too, and each frontend message is what the extension builds.
 */
import { describe, expect, it } from 'vitest';

import {
  DIGEST_MIME,
  KERNEL_MESSAGE_TYPES,
  NOTIFICATION_MIME,
  approveMessage,
  helloMessage,
  isObject,
  parseDigest,
  parseKernelMessage,
  parseTaskSnapshot,
  stopMessage
} from '../src/protocol';
import examples from './protocol-messages.json';

const kernel = examples.kernel_to_frontend as unknown[];
const frontend = examples.frontend_to_kernel as unknown[];

describe('the shared protocol examples', () => {
  it('have an example of every kernel message', () => {
    const types = new Set(kernel.map(m => (m as { type: string }).type));
    expect([...types].sort()).toEqual([...KERNEL_MESSAGE_TYPES].sort());
  });

  it.each(kernel.map(m => [(m as { type: string }).type, m]))('parses %s back to itself', (_type, message) => {
    expect(parseKernelMessage(message)).toEqual(message);
  });

  it('parses every notification payload back to itself', () => {
    let seen = 0;
    for (const message of kernel) {
      const cell = (message as { cell?: { outputs: { data: Record<string, unknown> }[] } }).cell;
      for (const output of cell?.outputs ?? []) {
        if (NOTIFICATION_MIME in output.data) {
          expect(parseTaskSnapshot(output.data[NOTIFICATION_MIME])).toEqual(output.data[NOTIFICATION_MIME]);
          seen += 1;
        }
        if (DIGEST_MIME in output.data) {
          expect(parseDigest(output.data[DIGEST_MIME])).toEqual(output.data[DIGEST_MIME]);
          seen += 1;
        }
      }
    }
    expect(seen).toBe(2);
  });

  it('builds every frontend message as the kernel takes it', () => {
    const built = [
      helloMessage(),
      approveMessage('7', 'allow'),
      approveMessage('7', 'always'),
      approveMessage('8', 'deny'),
      stopMessage((kernel[0] as { tasks: { id: string }[] }).tasks[0].id)
    ];
    expect(built).toEqual(frontend);
  });

  it('drops what is not a kernel message', () => {
    for (const junk of [null, 'welcome', [], {}, { type: 'inserted' }, { type: 'approval' }, { type: 'approval_done' }]) {
      expect(parseKernelMessage(junk)).toBeNull();
    }
    expect(frontend.every(isObject)).toBe(true);
  });
});
