//! The verified run tokens the data plane may serve from (design §2 "auth", §4 `token` frames): the
//! tokens Node's `cachedRunTokenVerifier` (src/gateway/token-cache.ts) remembered, pushed as the SHA-256
//! of the token with its project and `until`. A call whose token is not here, is past its `until`, or
//! belongs to another project is handed to Node (`token_miss`), which verifies it and writes any refusal.
//!
//! As token-cache.ts:
//! - an entry is served while `until > now` (an entry at its `until` is expired), and an expired entry
//!   met by a call is forgotten;
//! - the table holds at most `tokenCacheMaxEntries`; when full, the entry remembered longest ago goes
//!   (a JS Map's insertion order), and a token remembered again counts as new (Node forgets it before it
//!   remembers it again); `tokenCacheMaxEntries` 0 (no cache in Node) leaves the table empty;
//! - the token of the last hit is kept and a caller's repeated token is matched by comparing the bytes in
//!   constant time (`subtle`), without hashing it again. The token itself (the secret) is only ever
//!   compared in constant time. The map's look-up compares SHA-256 digests, whose timing tells nothing
//!   usable about a token; the entry found is still confirmed against the digest in constant time.
//!
//! No I/O: the clock is passed in.

use std::collections::{HashMap, VecDeque};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A token's SHA-256, over the whole token's bytes (its UTF-8, as Node hashes it).
pub type TokenDigest = [u8; 32];

/// One verified token, as Node pushes it (`Token` of design §4: `{sha256, projectId, until}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub sha256: TokenDigest,
    pub project_id: String,
    /// Served while `until > now` (epoch ms): the token's expiry or Node's cache TTL, the earlier.
    pub until: u64,
}

/// A call's token against the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCheck {
    /// Verified for this project until after `now`: the call may be served here.
    Verified,
    /// Not known, expired, or of another project: hand the call to Node (reason `token_miss`).
    Miss,
}

/// The SHA-256 of a token.
pub fn digest(token: &[u8]) -> TokenDigest {
    Sha256::digest(token).into()
}

/// A digest as the frames carry it: exactly 64 lower-case hex digits, else `None`.
pub fn parse_hex_digest(hex: &str) -> Option<TokenDigest> {
    let b = hex.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (k, o) in out.iter_mut().enumerate() {
        *o = (nibble(b[2 * k])? << 4) | nibble(b[2 * k + 1])?;
    }
    Some(out)
}

#[derive(Debug)]
struct Entry {
    project_id: String,
    until: u64,
    /// When it was remembered: its place in `order`.
    stamp: u64,
}

/// The table. Memory: the entries, plus their insertion order (compacted when stale places pile up).
#[derive(Debug)]
pub struct TokenTable {
    max_entries: usize,
    entries: HashMap<TokenDigest, Entry>,
    /// Digests in the order remembered, with the stamp they had then; a place whose entry has since
    /// gone or been remembered again is skipped (and dropped at the next compaction).
    order: VecDeque<(TokenDigest, u64)>,
    next_stamp: u64,
    /// The last hit's token bytes and digest (`lastToken` of token-cache.ts).
    last_token: Vec<u8>,
    last_digest: Option<TokenDigest>,
}

impl TokenTable {
    /// A table of at most `max_entries` tokens (`tokenCacheMaxEntries` of the `config` frame).
    pub fn new(max_entries: usize) -> Self {
        TokenTable {
            max_entries,
            entries: HashMap::new(),
            order: VecDeque::new(),
            next_stamp: 0,
            last_token: Vec::new(),
            last_digest: None,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every token (a `snapshot` replaces them).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
        self.forget_last();
    }

    /// A token Node verified (a `token` frame, or one of a `snapshot`'s in their order).
    pub fn remember(&mut self, token: Token) {
        if self.max_entries == 0 {
            return;
        }
        // Remembered again: as token-cache.ts, which forgets an entry before it remembers it anew.
        self.entries.remove(&token.sha256);
        while self.entries.len() >= self.max_entries {
            let Some((oldest, stamp)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&oldest).is_some_and(|e| e.stamp == stamp) {
                self.entries.remove(&oldest);
                if self.last_digest == Some(oldest) {
                    self.forget_last();
                }
            }
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.order.push_back((token.sha256, stamp));
        self.entries.insert(
            token.sha256,
            Entry {
                project_id: token.project_id,
                until: token.until,
                stamp,
            },
        );
        if self.order.len() > 2 * self.entries.len().max(16) {
            let entries = &self.entries;
            self.order
                .retain(|(d, s)| entries.get(d).is_some_and(|e| e.stamp == *s));
        }
    }

    /// Whether `token` (the bearer token's bytes) was verified for `project_id` and is live at `now`.
    /// An expired entry is forgotten.
    pub fn check(&mut self, token: &[u8], project_id: &str, now: u64) -> TokenCheck {
        // Node reads the header as latin1 and hashes the token's UTF-8: the same bytes only for ASCII.
        // (A run token is ASCII; a non-ASCII one never verifies, so Node answers it.)
        if !token.is_ascii() {
            return TokenCheck::Miss;
        }
        let digest = match self.last_digest {
            Some(d) if bool::from(self.last_token.as_slice().ct_eq(token)) => d,
            _ => digest(token),
        };
        let Some((key, entry)) = self.entries.get_key_value(&digest) else {
            return TokenCheck::Miss;
        };
        if !bool::from(key.ct_eq(&digest)) {
            return TokenCheck::Miss;
        }
        if entry.until <= now {
            self.entries.remove(&digest);
            if self.last_digest == Some(digest) {
                self.forget_last();
            }
            return TokenCheck::Miss;
        }
        if entry.project_id != project_id {
            return TokenCheck::Miss;
        }
        if self.last_digest != Some(digest) {
            self.last_token.clear();
            self.last_token.extend_from_slice(token);
            self.last_digest = Some(digest);
        }
        TokenCheck::Verified
    }

    fn forget_last(&mut self) {
        self.last_token.clear();
        self.last_digest = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn token(t: &str, project: &str, until: u64) -> Token {
        Token {
            sha256: digest(t.as_bytes()),
            project_id: project.to_owned(),
            until,
        }
    }

    #[test]
    fn digest_is_sha256_of_the_bytes() {
        // echo -n abc | sha256sum
        let want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(Some(digest(b"abc")), parse_hex_digest(want));
    }

    #[test]
    fn hex_digests_are_64_lower_case_digits() {
        let ok = "00".repeat(31) + "ff";
        assert_eq!(parse_hex_digest(&ok).unwrap()[31], 0xff);
        for bad in [
            String::new(),
            "00".repeat(31) + "FF",
            "00".repeat(31) + "f",
            "00".repeat(33),
            "00".repeat(31) + "g0",
            "00".repeat(31) + "+f",
        ] {
            assert_eq!(parse_hex_digest(&bad), None, "{bad}");
        }
    }

    #[test]
    fn a_live_token_of_the_project_is_verified() {
        let mut t = TokenTable::new(10);
        t.remember(token("tok-a", "acme", NOW + 1));
        // The first check hashes; the second is the last hit's constant-time comparison.
        assert_eq!(t.check(b"tok-a", "acme", NOW), TokenCheck::Verified);
        assert_eq!(t.check(b"tok-a", "acme", NOW), TokenCheck::Verified);
    }

    #[test]
    fn misses_are_handed_off() {
        let mut t = TokenTable::new(10);
        t.remember(token("tok-a", "acme", NOW + 1000));
        // Table-driven: (token, project, now).
        let cases: [(&[u8], &str, u64); 6] = [
            (b"tok-b", "acme", NOW),        // not verified
            (b"tok-", "acme", NOW),         // a prefix of a verified token
            (b"tok-a ", "acme", NOW),       // a longer one
            (b"tok-A", "acme", NOW),        // one byte off
            (b"tok-a", "other", NOW),       // another project
            (b"tok-a", "acme", NOW + 1000), // at its until: expired
        ];
        for (tok, project, now) in cases {
            // After a hit, so the last-hit comparison is the one asked.
            assert_eq!(t.check(b"tok-a", "acme", NOW), TokenCheck::Verified);
            assert_eq!(
                t.check(tok, project, now),
                TokenCheck::Miss,
                "{:?} {project} {now}",
                String::from_utf8_lossy(tok)
            );
            t.remember(token("tok-a", "acme", NOW + 1000));
        }
    }

    #[test]
    fn an_expired_entry_is_not_served_and_is_forgotten() {
        let mut t = TokenTable::new(10);
        t.remember(token("tok-a", "acme", NOW + 5));
        assert_eq!(t.check(b"tok-a", "acme", NOW + 4), TokenCheck::Verified);
        assert_eq!(t.check(b"tok-a", "acme", NOW + 5), TokenCheck::Miss);
        assert!(t.is_empty());
        // Not served again once the clock is read earlier either: it is gone until Node remembers it.
        assert_eq!(t.check(b"tok-a", "acme", NOW), TokenCheck::Miss);
        t.remember(token("tok-a", "acme", NOW + 50));
        assert_eq!(t.check(b"tok-a", "acme", NOW + 6), TokenCheck::Verified);
    }

    #[test]
    fn the_oldest_remembered_goes_when_full() {
        let mut t = TokenTable::new(3);
        for k in 0..3 {
            t.remember(token(&format!("t{k}"), "p", NOW + 100));
        }
        // A hit does not make an entry younger (a JS Map keeps insertion order).
        assert_eq!(t.check(b"t0", "p", NOW), TokenCheck::Verified);
        t.remember(token("t3", "p", NOW + 100));
        assert_eq!(t.len(), 3);
        let live = |t: &mut TokenTable| -> Vec<bool> {
            (0..4)
                .map(|k| t.check(format!("t{k}").as_bytes(), "p", NOW) == TokenCheck::Verified)
                .collect()
        };
        assert_eq!(live(&mut t), [false, true, true, true]);
        // Remembered again: the youngest, so t2 goes next.
        t.remember(token("t1", "p", NOW + 100));
        t.remember(token("t4", "p", NOW + 100));
        assert_eq!(live(&mut t), [false, true, false, true]);
        assert!(t.check(b"t4", "p", NOW) == TokenCheck::Verified);
        // Remembering a token the full table holds evicts no other one.
        t.remember(token("t4", "p", NOW + 200));
        assert_eq!(live(&mut t), [false, true, false, true]);
        assert_eq!(t.check(b"t4", "p", NOW + 150), TokenCheck::Verified);
        // The places of entries gone stay bounded.
        for k in 0..1000 {
            t.remember(token(&format!("t{}", k % 5), "p", NOW + 100));
        }
        assert_eq!(t.len(), 3);
        assert!(t.order.len() <= 32, "{}", t.order.len());
    }

    #[test]
    fn an_evicted_last_hit_is_not_served() {
        let mut t = TokenTable::new(1);
        t.remember(token("t0", "p", NOW + 100));
        assert_eq!(t.check(b"t0", "p", NOW), TokenCheck::Verified);
        t.remember(token("t1", "p", NOW + 100));
        assert_eq!(t.check(b"t0", "p", NOW), TokenCheck::Miss);
        assert_eq!(t.check(b"t1", "p", NOW), TokenCheck::Verified);
        t.clear();
        assert_eq!(t.check(b"t1", "p", NOW), TokenCheck::Miss);
    }

    #[test]
    fn a_non_ascii_token_is_handed_off() {
        // Header bytes c3 a9 are "Ã©" to node, hashed as c3 83 c2 a9: never the digest of these bytes,
        // which is the digest of the token "é" node would hash for header byte e9.
        let mut t = TokenTable::new(10);
        t.remember(token("é", "p", NOW + 100));
        assert_eq!(t.check("é".as_bytes(), "p", NOW), TokenCheck::Miss);
    }

    #[test]
    fn no_cache_in_node_means_no_hits() {
        let mut t = TokenTable::new(0);
        t.remember(token("t0", "p", NOW + 100));
        assert_eq!(t.check(b"t0", "p", NOW), TokenCheck::Miss);
    }
}
