//! The built binary, started as Node's supervisor will start it: the control channel is one end of a
//! Unix stream socketpair on its fd 3 (what `spawn`'s `'pipe'` gives a child).

mod support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;

use apphost_dataplane::frame::{FrameDecoder, encode};
use apphost_dataplane::message::{Message, PROTOCOL_VERSION};
use support::{BIN, EXIT_TIMEOUT, spawn as spawn_child, wait};

fn spawn() -> (std::process::Child, UnixStream) {
    let (child, ours) = spawn_child();
    ours.set_read_timeout(Some(EXIT_TIMEOUT)).unwrap();
    (child, ours)
}

fn read_message(decoder: &mut FrameDecoder, s: &mut UnixStream) -> Option<Message> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(p) = decoder.next_frame().unwrap() {
            return Some(Message::from_payload(&p).unwrap());
        }
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            decoder.finish().unwrap();
            return None;
        }
        decoder.push(&buf[..n]);
    }
}

#[test]
fn says_hello_answers_pings_and_exits_0_when_node_closes_the_channel() {
    let (child, mut s) = spawn();
    let mut d = FrameDecoder::new();
    match read_message(&mut d, &mut s) {
        Some(Message::Hello { protocol, build }) => {
            assert_eq!(protocol, PROTOCOL_VERSION);
            assert!(!build.is_empty());
        }
        other => panic!("first frame: {other:?}"),
    }
    for id in [7, 8] {
        s.write_all(&Message::Ping { id }.to_frame().unwrap()).unwrap();
        assert_eq!(read_message(&mut d, &mut s), Some(Message::Pong { id }));
    }
    drop(s);
    let out = wait(child);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn another_protocol_version_closes_the_channel_and_exits_3() {
    let (child, mut s) = spawn();
    let mut d = FrameDecoder::new();
    assert!(matches!(
        read_message(&mut d, &mut s),
        Some(Message::Hello { .. })
    ));
    s.write_all(&encode(br#"{"v":2,"type":"ping","id":1}"#).unwrap())
        .unwrap();
    assert_eq!(
        read_message(&mut d, &mut s),
        None,
        "the channel is closed, nothing answered"
    );
    let out = wait(child);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("version_mismatch"));
}

#[test]
fn a_length_over_the_bound_closes_the_channel_and_exits_3() {
    let (child, mut s) = spawn();
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let out = wait(child);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("frame_too_large"));
}

#[test]
fn version_names_the_protocol_and_build() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with(&format!(
            "apphost-dataplane {} (protocol {PROTOCOL_VERSION}, build ",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
}

#[test]
fn without_a_channel_on_fd_3_it_refuses_with_exit_2() {
    let mut cmd = Command::new(BIN);
    // SAFETY: close is async-signal-safe; an fd 3 inherited from the test runner must not count.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(3);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fd 3 is not open"),
        "{out:?}"
    );
}
