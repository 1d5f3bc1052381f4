//! The Redis connection options every subcommand that talks to Redis takes: the URL, the user, a password kept out of shell history, and TLS files.

use std::path::PathBuf;

use anyhow::Context;
use queuegen_runtime::{ConnectOptions, Redis};

/// The environment variable a password is taken from (never a flag: a flag
/// would sit in shell history and in every `ps` listing).
const PASSWORD_ENV: &str = "REDIS_PASSWORD";

#[derive(Clone, Debug, clap::Args)]
pub struct RedisArgs {
    /// Redis URL: redis://[user@]host:port[/db], or rediss:// for TLS.
    /// A password may sit in the URL, but REDIS_PASSWORD or
    /// --password-file keep it out of shell history.
    /// (Optional to clap so that a command may connect only in some modes,
    /// as `schedules --published` does; [`RedisArgs::url`] asks for it.)
    #[arg(long = "redis", env = "REDIS_URL", value_name = "URL")]
    url: Option<String>,

    /// The ACL user to log in as (wins over a user in the URL).
    #[arg(long, env = "REDIS_USER", value_name = "NAME")]
    pub user: Option<String>,

    /// A file holding the password (one trailing newline ignored), read
    /// again at every reconnection, so a rotated Secret needs no restart.
    /// Or set REDIS_PASSWORD.
    #[arg(long, env = "REDIS_PASSWORD_FILE", value_name = "PATH")]
    pub password_file: Option<PathBuf>,

    /// PEM file of the CA certificates that sign the server's certificate
    /// (rediss:// only); without it, the system's root certificates.
    #[arg(long, env = "REDIS_TLS_CA", value_name = "PATH")]
    pub tls_ca: Option<PathBuf>,

    /// PEM client certificate, for servers that require one (with --tls-key).
    #[arg(long, env = "REDIS_TLS_CERT", value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "REDIS_TLS_KEY", value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
}

impl RedisArgs {
    /// Connects with these options; an error names the URL without its password.
    pub async fn connect(&self) -> anyhow::Result<Redis> {
        let url = self.url()?;
        let options = self.options()?;
        Redis::connect_with(url, options)
            .await
            .with_context(|| format!("connecting to {}", self.redacted_url()))
    }

    /// The URL given with --redis or REDIS_URL; an error when neither is.
    pub fn url(&self) -> anyhow::Result<&str> {
        self.url.as_deref().context(
            "no Redis to connect to: give --redis URL (redis://[user@]host:port) or set REDIS_URL",
        )
    }

    /// The URL as given, with any user and password replaced by `***`: for messages.
    pub fn redacted_url(&self) -> String {
        redacted(self.url.as_deref().unwrap_or("(no URL)"))
    }

    fn options(&self) -> anyhow::Result<ConnectOptions> {
        let mut options = ConnectOptions::new();
        if let Some(user) = &self.user {
            options = options.username(user);
        }
        let from_env = match std::env::var(PASSWORD_ENV) {
            Ok(password) if !password.is_empty() => Some(password),
            Ok(_) | Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                anyhow::bail!("{PASSWORD_ENV} is not valid UTF-8")
            }
        };
        match (&self.password_file, from_env) {
            (Some(path), Some(_)) => anyhow::bail!(
                "both --password-file {} and {PASSWORD_ENV} give a password: use one",
                path.display()
            ),
            (Some(path), None) => options = options.password_file(path),
            (None, Some(password)) => options = options.password(password),
            (None, None) => {}
        }
        if let Some(ca) = &self.tls_ca {
            options = options.tls_ca_file(ca);
        }
        if let Some(cert) = &self.tls_cert {
            options = options.tls_client_cert_file(cert);
        }
        if let Some(key) = &self.tls_key {
            options = options.tls_client_key_file(key);
        }
        Ok(options)
    }
}

/// `url` with the user-information part (`user:password@`) replaced by `***@`.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_a_message() {
        assert_eq!(
            redacted("redis://worker:s3cret@cache:6379/0"),
            "redis://***@cache:6379/0"
        );
        assert_eq!(
            redacted("rediss://:s3cret@cache:6380"),
            "rediss://***@cache:6380"
        );
        assert_eq!(redacted("redis://127.0.0.1:1/"), "redis://127.0.0.1:1/");
        assert_eq!(redacted("not a url"), "not a url");
    }
}
