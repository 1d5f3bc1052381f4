//! The CLI's connection options: `apply` and `status` over mutual TLS as an ACL user whose password comes from `REDIS_PASSWORD` or `--password-file`, and bad connection input exits non-zero naming what and where, without a panic.

use std::path::Path;
use std::process::{Command, Output};

use queuegen_tests::tls::{ClientAuth, TestCa, TlsFiles, TlsServer};
use queuegen_tests::AclUser;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);

/// Runs `queuegen` with `args` and `env`, with no connection setting
/// inherited from the caller's environment.
fn queuegen(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_queuegen"));
    command.args(args).env("NO_COLOR", "1");
    for name in [
        "REDIS_URL",
        "REDIS_USER",
        "REDIS_PASSWORD",
        "REDIS_PASSWORD_FILE",
        "REDIS_TLS_CA",
        "REDIS_TLS_CERT",
        "REDIS_TLS_KEY",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().expect("queuegen runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

#[test]
fn apply_and_status_run_over_mutual_tls_with_the_password_out_of_the_command_line() {
    if queuegen_tests::tls::skip_without_tls() {
        return;
    }
    let ca = TestCa::new("queuegen CLI test CA");
    let tls = TlsServer::start(&ca, ClientAuth::Required);
    tls.server.add_user(&AclUser::new("ops", "pass1"));
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::write(dir.path(), "cli", &ca, &ca.client_cert("ops"));
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "pass1\n").unwrap();
    let url = tls.url();
    let tls_args = [
        "--redis",
        &url,
        "--user",
        "ops",
        "--tls-ca",
        path(&files.ca),
        "--tls-cert",
        path(&files.cert),
        "--tls-key",
        path(&files.key),
    ];

    let apply = [&["apply", EXAMPLE][..], &tls_args].concat();
    let out = queuegen(&apply, &[("REDIS_PASSWORD", "pass1")]);
    assert!(out.status.success(), "{out:?}");
    let status = [&["status", EXAMPLE, "--json"][..], &tls_args].concat();
    let out = queuegen(&status, &[("REDIS_PASSWORD_FILE", path(&password_file))]);
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        json["queues"].as_array().is_some_and(|q| !q.is_empty()),
        "{json}"
    );

    // A wrong password names the user and where the password came from,
    // and never prints it.
    let out = queuegen(&status, &[("REDIS_PASSWORD", "wrong-secret")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("refused user \"ops\" with the password given in the options"),
        "{err}"
    );
    assert!(
        !err.contains("wrong-secret") && !err.contains("panicked"),
        "{err}"
    );

    // Two password sources are one too many.
    let with_file = [&status[..], &["--password-file", path(&password_file)]].concat();
    let out = queuegen(&with_file, &[("REDIS_PASSWORD", "pass1")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("use one"), "{}", stderr(&out));

    // An unreadable CA file is named.
    let missing = dir.path().join("missing-ca.pem");
    let mut bad_ca = status.clone();
    let at = bad_ca.iter().position(|arg| *arg == "--tls-ca").unwrap();
    bad_ca[at + 1] = path(&missing);
    let out = queuegen(&bad_ca, &[("REDIS_PASSWORD", "pass1")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("reading the TLS CA file {}", missing.display())),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A password in the URL never reaches a message.
    let out = queuegen(
        &[
            "status",
            EXAMPLE,
            "--redis",
            "redis://ops:hunter2@127.0.0.1:1/",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("connecting to redis://***@127.0.0.1:1/"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}
