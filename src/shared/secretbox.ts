/**
 * Encrypts small secrets (webhook signing secrets) before they are written to a JetStream stream,
 * with AES-256-GCM under the platform key. Format: base64url(iv[12] | tag[16] | ciphertext).
 */
import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes } from 'node:crypto';

export interface SecretBox {
  seal(plaintext: string): string;
  open(sealed: string): string;
}

/** `key` is any high-entropy string (e.g. 32 random bytes, base64); it is hashed to 256 bits. */
export function createSecretBox(key: string): SecretBox {
  if (key.length < 16) throw new Error('platform key must be at least 16 characters');
  // A KeyObject once: a raw Buffer key is imported again by every cipher (a measurable share of a signed delivery).
  const k = createSecretKey(createHash('sha256').update(key, 'utf8').digest());
  return {
    seal(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', k, iv);
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64url');
    },
    open(sealed) {
      const raw = Buffer.from(sealed, 'base64url');
      if (raw.length < 28) throw new Error('sealed secret is truncated');
      const decipher = createDecipheriv('aes-256-gcm', k, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    },
  };
}
