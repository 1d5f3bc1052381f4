//! Turns a URL and its [`ConnectOptions`] into a `redis::Client`, reading the password and TLS files anew each time.
//!
//! The redis crate fixes the credentials and certificates of a client when
//! it is built, and its reconnecting connections reuse them. So the runtime
//! asks the connector for a new client every time it (re)connects: a
//! password or certificate rotated on disk is used by the next connection.

use std::path::Path;

use redis::{ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::options::{ConnectOptions, PasswordSource};
use crate::error::{ConnectionError, Error, FileProblem, OptionsProblem, Result};

/// The URL and options of one deployment; makes clients on demand.
#[derive(Clone, Debug)]
pub(crate) struct Connector {
    url: ConnectionInfo,
    options: ConnectOptions,
}

impl Connector {
    /// Checks that `url` parses and that the options fit it; reads no file yet.
    pub(crate) fn new(url: &str, options: ConnectOptions) -> Result<Connector> {
        let url = url
            .into_connection_info()
            .map_err(|err| Error::redis("parsing the Redis URL", err))?;
        let connector = Connector { url, options };
        if connector.options.has_tls_files() && !connector.is_tls() {
            return Err(connector.options_error(OptionsProblem::TlsFilesWithoutTls));
        }
        if connector.options.tls_cert.is_some() != connector.options.tls_key.is_some() {
            return Err(connector.options_error(OptionsProblem::HalfAClientCertificate));
        }
        if connector.is_tls() {
            // The redis crate leaves the choice of crypto provider to the
            // application; an application that installed one keeps it.
            // rustls 0.23.48 deprecates its ring provider (it has no
            // post-quantum key exchange); ring stays the default here because
            // aws-lc-rs adds a C build every service would pay for. An
            // application that wants post-quantum installs aws-lc-rs first.
            #[allow(deprecated)]
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        Ok(connector)
    }

    /// `host:port`, without credentials, for messages.
    pub(crate) fn addr(&self) -> String {
        self.url.addr().to_string()
    }

    /// The URL without its credentials, for messages.
    pub(crate) fn redacted_url(&self) -> String {
        let scheme = if self.is_tls() { "rediss" } else { "redis" };
        format!("{scheme}://{}", self.addr())
    }

    /// `true` for `rediss://`.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self.url.addr(), ConnectionAddr::TcpTls { .. })
    }

    /// `true` when each reconnection must read files again.
    pub(crate) fn reads_files(&self) -> bool {
        self.options.reads_files()
    }

    /// The database the URL selects.
    pub(crate) fn db(&self) -> i64 {
        self.url.redis_settings().db()
    }

    /// A client with the credentials and certificates as the files hold them now.
    pub(crate) fn client(&self) -> Result<redis::Client> {
        let mut settings = self.url.redis_settings().clone();
        if let Some(username) = &self.options.username {
            settings = settings.set_username(username);
        }
        match &self.options.password {
            Some(PasswordSource::Literal(password)) => settings = settings.set_password(password),
            Some(PasswordSource::File(path)) => {
                settings = settings.set_password(read_password(path)?);
            }
            None => {}
        }
        let info = self.url.clone().set_redis_settings(settings);
        let built = match self.certificates()? {
            Some(certificates) => redis::Client::build_with_tls(info, certificates),
            None => redis::Client::open(info),
        };
        built.map_err(|err| self.options_error(OptionsProblem::Client(err.to_string())))
    }

    /// The URL and options do not fit together, or make no client.
    fn options_error(&self, problem: OptionsProblem) -> Error {
        let url = self.redacted_url();
        Error::Connection(ConnectionError::ConnectOptions { url, problem })
    }

    /// The connection settings of a new client (credentials and TLS
    /// parameters included): a Cluster's seed.
    pub(crate) fn connection_info(&self) -> Result<ConnectionInfo> {
        Ok(self.client()?.get_connection_info().clone())
    }

    /// The TLS files as they are now, when any is named.
    pub(crate) fn certificates(&self) -> Result<Option<TlsCertificates>> {
        if !self.options.has_tls_files() {
            return Ok(None);
        }
        let root_cert = self.options.tls_ca.as_deref();
        let root_cert = root_cert
            .map(|ca| read_certificates(ca, "TLS CA file"))
            .transpose()?;
        let client_tls = match (&self.options.tls_cert, &self.options.tls_key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: read_certificates(cert, "TLS client certificate file")?,
                client_key: read_private_key(key)?,
            }),
            _ => None,
        };
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }

    /// The user and the password as the password file holds it now, or
    /// `None` when the password does not come from a file.
    pub(crate) fn file_credentials(&self) -> Option<Result<(String, String)>> {
        let Some(PasswordSource::File(path)) = &self.options.password else {
            return None;
        };
        Some(read_password(path).map(|password| (self.username().to_owned(), password)))
    }

    /// The contents of the CA, client certificate and key files (`None`
    /// for one that cannot be read), to tell when any of them changed.
    pub(crate) fn tls_file_contents(&self) -> Vec<Option<Vec<u8>>> {
        let options = &self.options;
        [&options.tls_ca, &options.tls_cert, &options.tls_key]
            .into_iter()
            .flatten()
            .map(|path| std::fs::read(path).ok())
            .collect()
    }

    /// `true` when a CA, client certificate or key file is named.
    pub(crate) fn has_tls_files(&self) -> bool {
        self.options.has_tls_files()
    }

    /// A failed connection attempt as an error naming the server, and the
    /// user and password source when the server refused them.
    pub(crate) fn connect_error(&self, doing: &str, err: redis::RedisError) -> Error {
        let refused_credentials = err.kind() == redis::ErrorKind::AuthenticationFailed
            || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"));
        if refused_credentials {
            return Error::Connection(ConnectionError::Authentication {
                server: self.addr(),
                user: self.username().to_owned(),
                password_from: self.password_from(),
                source: err,
            });
        }
        let tls = match &self.options.tls_ca {
            _ if !self.is_tls() => String::new(),
            Some(ca) => format!(" over TLS, trusting the CAs in {}", ca.display()),
            None => " over TLS, trusting the system's root certificates".to_owned(),
        };
        Error::redis(format!("{doing} {}{tls}", self.addr()), err)
    }

    fn username(&self) -> &str {
        self.options
            .username
            .as_deref()
            .or(self.url.redis_settings().username())
            .unwrap_or("default")
    }

    fn password_from(&self) -> String {
        match &self.options.password {
            Some(PasswordSource::File(path)) => format!("from the file {}", path.display()),
            Some(PasswordSource::Literal(_)) => "given in the options".to_owned(),
            None if self.url.redis_settings().password().is_some() => "from the URL".to_owned(),
            None => "(none given)".to_owned(),
        }
    }
}

/// A password file's content without its trailing newline: `echo` and
/// most editors add one, a Kubernetes Secret usually has none.
fn read_password(path: &Path) -> Result<String> {
    let what = "password file";
    let text = std::fs::read_to_string(path).map_err(unreadable(what, path))?;
    let password = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if password.is_empty() {
        return Err(invalid(what, path, FileProblem::Empty));
    }
    Ok(password.to_owned())
}

/// A PEM file of one or more certificates, checked here so that a wrong
/// file is named now rather than failing every handshake later.
fn read_certificates(path: &Path, what: &'static str) -> Result<Vec<u8>> {
    let pem = std::fs::read(path).map_err(unreadable(what, path))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|err| invalid(what, path, FileProblem::NotPemCertificates(err.to_string())))?;
    if certificates.is_empty() {
        return Err(invalid(what, path, FileProblem::NoCertificate));
    }
    Ok(pem)
}

fn read_private_key(path: &Path) -> Result<Vec<u8>> {
    let what = "TLS client key file";
    let pem = std::fs::read(path).map_err(unreadable(what, path))?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|err| invalid(what, path, FileProblem::NoPrivateKey(err.to_string())))?;
    Ok(pem)
}

/// The error of a file that cannot be read; `what` names it.
fn unreadable<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| {
        let path = path.to_owned();
        Error::Connection(ConnectionError::ConnectionFile { what, path, source })
    }
}

/// The error of a file that was read but cannot be used.
fn invalid(what: &'static str, path: &Path, problem: FileProblem) -> Error {
    let path = path.to_owned();
    Error::Connection(ConnectionError::InvalidConnectionFile {
        what,
        path,
        problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_files_need_a_rediss_url() {
        let options = ConnectOptions::new().tls_ca_file("/nowhere/ca.pem");
        let err = Connector::new("redis://127.0.0.1:7000", options).unwrap_err();
        assert!(err.to_string().contains("not rediss://"), "{err}");
    }

    #[test]
    fn a_client_certificate_needs_its_key() {
        let options = ConnectOptions::new().tls_client_cert_file("/nowhere/client.pem");
        let err = Connector::new("rediss://127.0.0.1:7000", options).unwrap_err();
        assert!(err.to_string().contains("needs its private key"), "{err}");
    }

    #[test]
    fn a_password_file_is_read_at_each_client_without_its_newline() {
        let dir = std::env::temp_dir().join(format!("qg-connector-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("password");
        std::fs::write(&path, "first\n").unwrap();
        let connector = Connector::new(
            "redis://127.0.0.1:7000",
            ConnectOptions::new()
                .username("worker")
                .password_file(&path),
        )
        .unwrap();
        let password = |connector: &Connector| {
            let client = connector.client().unwrap();
            client
                .get_connection_info()
                .redis_settings()
                .password()
                .map(str::to_owned)
        };
        assert_eq!(password(&connector).as_deref(), Some("first"));
        std::fs::write(&path, "second").unwrap();
        assert_eq!(password(&connector).as_deref(), Some("second"));
        std::fs::write(&path, "\n").unwrap();
        let err = connector.client().unwrap_err();
        assert!(err.to_string().contains("is empty"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unreadable_ca_file_is_named() {
        let connector = Connector::new(
            "rediss://127.0.0.1:7000",
            ConnectOptions::new().tls_ca_file("/nowhere/ca.pem"),
        )
        .unwrap();
        let err = connector.client().unwrap_err();
        assert_eq!(
            err.to_string().split(':').next(),
            Some("reading the TLS CA file /nowhere/ca.pem"),
            "{err}"
        );
    }
}
