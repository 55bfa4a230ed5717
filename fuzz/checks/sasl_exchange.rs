//! The SASL mechanisms on arbitrary client messages: never a panic, and never authenticated
//! without the password. Each input is split at 0xFF bytes into messages; its first byte picks
//! the mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN). The one user's password is not
//! reachable from an input (it is 32 random-looking bytes the fuzzer would have to guess), so
//! an exchange that completes is a bug.

use std::sync::OnceLock;
use tidemark::security::sasl::{Exchange, Step, MECHANISMS};
use tidemark::security::{Credential, Credentials, Mechanism};

const PASSWORD: &[u8] = b"q8V2nX0rT5wL1mZ7cB4kP9sD3fH6jG0a";

fn credentials() -> &'static Credentials {
    static C: OnceLock<Credentials> = OnceLock::new();
    C.get_or_init(|| {
        let mut c = Credentials::default();
        for m in Mechanism::ALL {
            c.set("user", m, Some(Credential::from_password(m, PASSWORD, 4096)));
        }
        c
    })
}

/// One input: what the fuzz target and the seed-replay test both run.
pub fn run(data: &[u8]) {
    let Some((first, rest)) = data.split_first() else { return };
    let mut x = Exchange::start(MECHANISMS[*first as usize % MECHANISMS.len()]).expect("a served mechanism");
    for message in rest.split(|b| *b == 0xff).take(4) {
        match x.step(message, credentials()) {
            Ok(Step::Done { .. }) => panic!("authenticated without the password"),
            Ok(Step::Continue(_)) => {}
            Err(_) => return,
        }
    }
}
