//! Connection settings with libpq's meaning: a conninfo (`key=value …` or a
//! `postgresql://` URI), the `PG*` environment variables as defaults, the
//! password from the conninfo, `PGPASSWORD`, a `.pgpass` file or a Secrets
//! Manager secret, and `sslmode`/`sslrootcert` enforced with rustls.
//!
//! tokio-postgres knows neither `verify-ca`/`verify-full` nor `sslrootcert`
//! nor `.pgpass`, so floe parses the conninfo itself, keeps those keys and
//! hands the rest to tokio-postgres.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde::Deserialize as _;
use tokio_postgres::config::SslMode as DriverSslMode;
use tokio_postgres::{Client, Config, NoTls};
use tracing::Instrument as _;

use crate::PgError;
use crate::tls::{MakeRustls, Verify, client_config};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// Plain first, TLS if the server insists.
    Allow,
    /// TLS if the server offers it, unverified (libpq's default).
    Prefer,
    /// TLS or fail, unverified (unless a root certificate is configured).
    Require,
    /// TLS with a certificate signed by a trusted CA.
    VerifyCa,
    /// TLS with a trusted certificate for the host name connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<Self, PgError> {
        Ok(match text {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(conninfo_error(format!(
                    "sslmode {other:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }

    /// The name libpq uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// Where trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more certificates (the RDS CA bundle works).
    File(PathBuf),
    /// The operating system's trust store (`sslrootcert=system`).
    System,
}

/// A login from a Secrets Manager secret: the JSON RDS and its rotation
/// functions write (`username`, `password`, and optionally `host`, `port`,
/// `dbname`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SecretLogin {
    /// The role.
    pub username: String,
    /// Its password.
    pub password: String,
    /// The server, when the secret names it.
    #[serde(default)]
    pub host: Option<String>,
    /// Its port: a number or a string, both occur.
    #[serde(default, deserialize_with = "port_number_or_text")]
    pub port: Option<u16>,
    /// The database.
    #[serde(default)]
    pub dbname: Option<String>,
}

impl SecretLogin {
    /// Parses the secret's JSON string, naming what is wrong (never the values).
    pub fn from_json(text: &str) -> Result<Self, PgError> {
        serde_json::from_str(text).map_err(|e| {
            conninfo_error(format!(
                "the secret is not the JSON RDS writes ({{\"username\", \"password\", \"host\", \"port\", \"dbname\"}}): {e}"
            ))
        })
    }
}

/// Reads the login secret `arn` (config key `postgres.secret`).
#[cfg(feature = "aws")]
pub async fn read_login(
    clients: &floe_core::aws::AwsClients,
    arn: &str,
) -> Result<SecretLogin, PgError> {
    let text = floe_core::secrets::read_secret(clients, "postgres.secret", arn)
        .await
        .map_err(|e| setup_error("postgres.secret".into(), e))?;
    SecretLogin::from_json(&text).map_err(|e| conninfo_error(format!("postgres.secret {arn}: {e}")))
}

/// Reads the login secret `arn` with the `[aws]` settings of `config`; an
/// error naming the fix when floe was built without AWS support.
pub async fn login_for(
    config: &floe_core::config::Config,
    arn: &str,
) -> Result<SecretLogin, PgError> {
    #[cfg(feature = "aws")]
    {
        let clients = floe_core::deploy::aws_clients(config).await;
        read_login(&clients, arn).await
    }
    #[cfg(not(feature = "aws"))]
    {
        let _ = config;
        Err(conninfo_error(format!(
            "a login secret ({arn}) needs floe built with floe-postgres's `aws` feature (the CLI's `full`)"
        )))
    }
}

fn port_number_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    use serde::de::Error as _;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom("port out of range")),
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| D::Error::custom("port is not a number")),
        Some(_) => Err(D::Error::custom("port is not a number")),
    }
}

/// Everything needed to open a session, resolved from a conninfo.
#[derive(Debug, Clone)]
pub struct ConnSettings {
    /// The keys tokio-postgres understands (password included once resolved).
    params: BTreeMap<String, String>,
    /// The requested TLS mode.
    pub sslmode: SslMode,
    /// Trusted roots, when configured (explicitly or `~/.postgresql/root.crt`).
    pub root_cert: Option<RootCert>,
    /// Where the password came from, for messages (never the password).
    pub password_source: &'static str,
}

/// The environment variables libpq reads as defaults, by conninfo key.
const ENV_DEFAULTS: &[(&str, &str)] = &[
    ("host", "PGHOST"),
    ("hostaddr", "PGHOSTADDR"),
    ("port", "PGPORT"),
    ("dbname", "PGDATABASE"),
    ("user", "PGUSER"),
    ("password", "PGPASSWORD"),
    ("passfile", "PGPASSFILE"),
    ("sslmode", "PGSSLMODE"),
    ("sslrootcert", "PGSSLROOTCERT"),
    ("application_name", "PGAPPNAME"),
    ("connect_timeout", "PGCONNECT_TIMEOUT"),
    ("options", "PGOPTIONS"),
    ("target_session_attrs", "PGTARGETSESSIONATTRS"),
];

impl ConnSettings {
    /// Resolves `conninfo` with the process environment and home directory.
    pub fn resolve(conninfo: &str, secret: Option<&SecretLogin>) -> Result<Self, PgError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::resolve_with(
            conninfo,
            secret,
            &|k| std::env::var(k).ok(),
            home.as_deref(),
        )
    }

    /// [`ConnSettings::resolve`] with an explicit environment, for tests.
    ///
    /// Precedence, as libpq's plus the secret: the secret's username and
    /// password win (they rotate together); the conninfo's host, port and
    /// dbname win over the secret's (to reach the server through a proxy,
    /// say); `PG*` variables fill what is still unset; a password still
    /// missing comes from the passfile.
    pub fn resolve_with(
        conninfo: &str,
        secret: Option<&SecretLogin>,
        env: &dyn Fn(&str) -> Option<String>,
        home: Option<&Path>,
    ) -> Result<Self, PgError> {
        let mut params = parse_conninfo(conninfo)?;
        let mut password_source = if params.contains_key("password") {
            "the conninfo"
        } else {
            ""
        };
        if let Some(s) = secret {
            params.insert("user".into(), s.username.clone());
            params.insert("password".into(), s.password.clone());
            password_source = "the secret";
            let fill = [
                ("host", s.host.clone()),
                ("port", s.port.map(|p| p.to_string())),
                ("dbname", s.dbname.clone()),
            ];
            for (key, value) in fill {
                if let Some(v) = value {
                    params.entry(key.into()).or_insert(v);
                }
            }
        }
        for (key, var) in ENV_DEFAULTS {
            if params.contains_key(*key) {
                continue;
            }
            if let Some(v) = env(var).filter(|v| !v.is_empty()) {
                if *key == "password" {
                    password_source = "PGPASSWORD";
                }
                params.insert((*key).into(), v);
            }
        }
        if !params.contains_key("user")
            && let Some(user) = env("USER").or_else(|| env("LOGNAME"))
        {
            params.insert("user".into(), user);
        }
        let passfile = params.remove("passfile");
        if !params.contains_key("password") {
            let path = passfile
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".pgpass")));
            if let Some(path) = path
                && let Some(pw) = pgpass_lookup(&path, &params)?
            {
                params.insert("password".into(), pw);
                password_source = "the passfile";
            }
        }

        let (sslmode, root_cert) = tls_settings(&mut params, home)?;
        // Fail here, naming the key, rather than at connect time.
        driver_config(&params)?;
        Ok(Self {
            params,
            sslmode,
            root_cert,
            password_source,
        })
    }

    /// Sets `application_name` unless the conninfo or `PGAPPNAME` did, so
    /// DBAs see floe's sessions in `pg_stat_activity`.
    pub fn with_default_application_name(mut self, name: &str) -> Self {
        self.params
            .entry("application_name".into())
            .or_insert_with(|| name.to_string());
        self
    }

    /// The first host, as messages and `verify-full` see it.
    pub fn host(&self) -> String {
        self.params
            .get("host")
            .and_then(|h| h.split(',').next())
            .unwrap_or("localhost")
            .to_string()
    }

    /// How certificates are checked in this mode: libpq's `require` checks
    /// the CA when a root certificate is configured.
    fn verify(&self) -> Verify {
        match self.sslmode {
            SslMode::VerifyFull => Verify::Full,
            SslMode::VerifyCa => Verify::Ca,
            SslMode::Require if self.root_cert.is_some() => Verify::Ca,
            _ => Verify::Nothing,
        }
    }

    fn roots(&self) -> Result<RootCertStore, PgError> {
        let mut roots = RootCertStore::empty();
        match &self.root_cert {
            None => {}
            Some(RootCert::File(path)) => {
                let what = || format!("sslrootcert {}", path.display());
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| setup_error(what(), e))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| setup_error(what(), e))?;
                if certs.is_empty() {
                    return Err(conninfo_error(format!(
                        "{}: no PEM certificate in the file",
                        what()
                    )));
                }
                for cert in certs {
                    roots.add(cert).map_err(|e| setup_error(what(), e))?;
                }
            }
            Some(RootCert::System) => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // A system store may hold certificates webpki cannot
                    // parse; the others still count, as in libpq.
                    let _ = roots.add(cert);
                }
                if roots.is_empty() {
                    return Err(conninfo_error(format!(
                        "sslrootcert=system: no trusted roots found in the system store ({} errors); \
                         install ca-certificates or set sslrootcert to a PEM file",
                        found.errors.len()
                    )));
                }
            }
        }
        Ok(roots)
    }

    /// Opens a plain session as `sslmode` says (no session settings).
    pub async fn connect(&self) -> Result<Client, PgError> {
        let span = tracing::info_span!("pg_connection", host = %self.host());
        self.connect_in(span).await
    }

    /// [`ConnSettings::connect`], the connection's task running in `span`.
    pub(crate) async fn connect_in(&self, span: tracing::Span) -> Result<Client, PgError> {
        let mut config = driver_config(&self.params)?;
        let result = match self.sslmode {
            SslMode::Disable => {
                config.ssl_mode(DriverSslMode::Disable);
                spawn(config.connect(NoTls).await, span)
            }
            SslMode::Allow => {
                config.ssl_mode(DriverSslMode::Disable);
                match config.connect(NoTls).await {
                    Ok(pair) => spawn(Ok(pair), span),
                    // A server that insists on TLS rejects the plain attempt.
                    Err(_) => {
                        config.ssl_mode(DriverSslMode::Require);
                        spawn(config.connect(self.tls()?).await, span)
                    }
                }
            }
            SslMode::Prefer => {
                config.ssl_mode(DriverSslMode::Prefer);
                spawn(config.connect(self.tls()?).await, span)
            }
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                config.ssl_mode(DriverSslMode::Require);
                spawn(config.connect(self.tls()?).await, span)
            }
        };
        result.map_err(|e| self.connect_error(e))
    }

    fn tls(&self) -> Result<MakeRustls, PgError> {
        Ok(MakeRustls(self.tls_config()?))
    }

    /// The rustls client config `sslmode` and `sslrootcert` ask for.
    pub(crate) fn tls_config(&self) -> Result<std::sync::Arc<rustls::ClientConfig>, PgError> {
        let config = client_config(self.verify(), self.roots()?)
            .map_err(|e| setup_error("TLS setup".into(), e))?;
        Ok(std::sync::Arc::new(config))
    }

    /// A resolved connection parameter (the password included, if found).
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// Names what failed and what to do for the TLS failures libpq users meet.
    fn connect_error(&self, e: tokio_postgres::Error) -> PgError {
        let host = self.host();
        let mode = self.sslmode.name();
        let text = crate::error::describe(&e);
        let tls = rustls_error(&e);
        let fix = match tls {
            Some(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Some(format!(
                "the server's certificate is not issued for host {host:?}; connect with a host name \
                 the certificate names, or use sslmode=verify-ca to check only the CA"
            )),
            Some(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)) => {
                Some(format!(
                    "the server's certificate is not signed by a CA in {}; set sslrootcert to the \
                     CA that signed it (RDS: global-bundle.pem)",
                    match &self.root_cert {
                        Some(RootCert::File(p)) => p.display().to_string(),
                        Some(RootCert::System) => "the system store".into(),
                        None => "sslrootcert".into(),
                    }
                ))
            }
            Some(_) => Some(format!(
                "the TLS handshake with {host} failed under sslmode={mode}"
            )),
            None if text.contains("server does not support TLS") => Some(format!(
                "the server at {host} does not accept TLS, which sslmode={mode} requires; \
                 turn on ssl on the server, or use sslmode=prefer or disable on a trusted network"
            )),
            None if text.contains("password authentication failed") => Some(format!(
                "the password from {} was refused; check it (a rotated secret is re-read on \
                 the next run)",
                if self.password_source.is_empty() {
                    "nowhere (none was found: set it in the conninfo, PGPASSWORD, ~/.pgpass or a secret)"
                } else {
                    self.password_source
                }
            )),
            None => None,
        };
        match fix {
            Some(fix) => PgError::Connect {
                host,
                sslmode: mode,
                fix,
                source: e,
            },
            None => PgError::Query {
                context: format!("connecting to {host} (sslmode={mode})"),
                source: e,
            },
        }
    }
}

/// The TLS mode and trusted roots the conninfo's `sslmode` and
/// `sslrootcert` ask for (taken out of `params`), with libpq's defaults and
/// its refusals of combinations that would not verify the server.
fn tls_settings(
    params: &mut BTreeMap<String, String>,
    home: Option<&Path>,
) -> Result<(SslMode, Option<RootCert>), PgError> {
    let sslmode_text = params.remove("sslmode");
    let root_text = params.remove("sslrootcert");
    let root_cert = match root_text.as_deref() {
        Some("system") => Some(RootCert::System),
        Some(path) => Some(RootCert::File(PathBuf::from(path))),
        // libpq's default location counts only when the file exists.
        None => home
            .map(|h| h.join(".postgresql/root.crt"))
            .filter(|p| p.is_file())
            .map(RootCert::File),
    };
    let sslmode = match sslmode_text.as_deref() {
        Some(text) => SslMode::parse(text)?,
        // libpq 16: sslrootcert=system defaults to verify-full.
        None if root_cert == Some(RootCert::System) => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if root_cert == Some(RootCert::System) && sslmode != SslMode::VerifyFull {
        return Err(conninfo_error(format!(
            "weak sslmode {:?} may not be used with sslrootcert=system; use sslmode=verify-full",
            sslmode.name()
        )));
    }
    if matches!(sslmode, SslMode::VerifyCa | SslMode::VerifyFull) && root_cert.is_none() {
        return Err(conninfo_error(format!(
            "sslmode={} needs trusted roots, and ~/.postgresql/root.crt does not exist; fix: \
             set sslrootcert=/path/to/ca.pem (for RDS, the global-bundle.pem AWS publishes) or \
             sslrootcert=system for the operating system's roots",
            sslmode.name()
        )));
    }
    Ok((sslmode, root_cert))
}

/// The rustls error under a tokio-postgres connect error, if TLS failed.
fn rustls_error(e: &tokio_postgres::Error) -> Option<&rustls::Error> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && let Some(r) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(r);
        }
        source = s.source();
    }
    None
}

/// Drives the connection in its own task; the client is returned.
fn spawn<S, T>(
    result: Result<(Client, tokio_postgres::Connection<S, T>), tokio_postgres::Error>,
    span: tracing::Span,
) -> Result<Client, tokio_postgres::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (client, connection) = result?;
    tokio::spawn(
        async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "postgres connection ended");
            }
        }
        .instrument(span),
    );
    Ok(client)
}

/// The tokio-postgres config of the keys it understands.
fn driver_config(params: &BTreeMap<String, String>) -> Result<Config, PgError> {
    let text: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", quote_value(v)))
        .collect();
    Config::from_str(&text.join(" ")).map_err(|e| {
        // tokio-postgres names the key only in the error's source.
        let message = crate::error::describe(&e);
        let key = params
            .keys()
            .find(|k| message.contains(k.as_str()))
            .cloned()
            .unwrap_or_default();
        conninfo_error(if key.is_empty() {
            message
        } else {
            format!("key {key}: {message}")
        })
    })
}

fn quote_value(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn conninfo_error(message: String) -> PgError {
    PgError::Conninfo { message }
}

/// Reading or using what the conninfo names (`context`) failed with `e`.
fn setup_error(context: String, e: impl Into<floe_core::error::BoxError>) -> PgError {
    PgError::Setup {
        context,
        source: e.into(),
    }
}

/// Parses a libpq conninfo: `key=value` pairs (values optionally in single
/// quotes, `\` escaping) or a `postgres://`/`postgresql://` URI.
pub fn parse_conninfo(text: &str) -> Result<BTreeMap<String, String>, PgError> {
    let text = text.trim();
    if let Some(rest) = text
        .strip_prefix("postgresql://")
        .or_else(|| text.strip_prefix("postgres://"))
    {
        return parse_uri(rest);
    }
    let mut out = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(conninfo_error(format!("missing \"=\" after {key:?}")));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    None => {
                        return Err(conninfo_error(format!(
                            "unterminated quoted value of {key}"
                        )));
                    }
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => {
                            return Err(conninfo_error(format!(
                                "unterminated quoted value of {key}"
                            )));
                        }
                    },
                    Some('\'') => break,
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        value.push(n);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        out.insert(key, value);
    }
}

/// `[user[:password]@][host][:port][,host2…][/dbname][?key=value&…]`.
fn parse_uri(rest: &str) -> Result<BTreeMap<String, String>, PgError> {
    let mut out = BTreeMap::new();
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, dbname) = main.split_once('/').unwrap_or((main, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if let Some(u) = userinfo {
        let (user, password) = u.split_once(':').map_or((u, None), |(a, b)| (a, Some(b)));
        if !user.is_empty() {
            out.insert("user".into(), percent_decode(user)?);
        }
        if let Some(p) = password {
            out.insert("password".into(), percent_decode(p)?);
        }
    }
    if !hosts.is_empty() {
        let mut names = Vec::new();
        let mut ports = Vec::new();
        for h in hosts.split(',') {
            // [v6]:port, name:port, name
            let (name, port) = if let Some(v6) = h.strip_prefix('[') {
                let (addr, after) = v6
                    .split_once(']')
                    .ok_or_else(|| conninfo_error(format!("unclosed [ in host {h:?}")))?;
                (
                    addr.to_string(),
                    after.strip_prefix(':').map(str::to_string),
                )
            } else {
                match h.rsplit_once(':') {
                    Some((n, p)) => (n.to_string(), Some(p.to_string())),
                    None => (h.to_string(), None),
                }
            };
            names.push(percent_decode(&name)?);
            ports.push(port.unwrap_or_default());
        }
        out.insert("host".into(), names.join(","));
        if ports.iter().any(|p| !p.is_empty()) {
            out.insert("port".into(), ports.join(","));
        }
    }
    if !dbname.is_empty() {
        out.insert("dbname".into(), percent_decode(dbname)?);
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| conninfo_error(format!("URI parameter {pair:?} has no value")))?;
        out.insert(percent_decode(k)?, percent_decode(v)?);
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String, PgError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| conninfo_error(format!("bad percent escape in {text:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| conninfo_error(format!("{text:?} is not UTF-8 once decoded")))
}

/// The password `.pgpass` holds for these settings: the first line whose
/// `host:port:database:user` matches (`*` matches anything). Like libpq, a
/// file readable by group or others is ignored, with a warning.
fn pgpass_lookup(
    path: &Path,
    params: &BTreeMap<String, String>,
) -> Result<Option<String>, PgError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                "password file has group or world access; ignored (fix: chmod 0600)"
            );
            return Ok(None);
        }
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| setup_error(format!("passfile {}", path.display()), e))?;
    let first = |key: &str| {
        params
            .get(key)
            .and_then(|v| v.split(',').next())
            .map(str::to_string)
    };
    let host = match first("host") {
        // A socket directory matches `localhost`, as in libpq.
        Some(h) if h.starts_with('/') => "localhost".to_string(),
        Some(h) if !h.is_empty() => h,
        _ => "localhost".to_string(),
    };
    let port = first("port")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "5432".into());
    let user = first("user").unwrap_or_default();
    let dbname = first("dbname").unwrap_or_else(|| user.clone());
    let want = [host.as_str(), port.as_str(), dbname.as_str(), user.as_str()];
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_pgpass(line);
        if fields.len() < 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(want)
            .all(|(field, value)| field == "*" || field == value)
        {
            return Ok(Some(fields[4..].join(":")));
        }
    }
    Ok(None)
}

/// Splits a `.pgpass` line at unescaped colons, undoing `\:` and `\\`.
fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next()
                    && let Some(last) = fields.last_mut()
                {
                    last.push(n);
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(last) = fields.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn parses_key_values_with_quotes_and_uris() {
        let p = parse_conninfo(r"host=db port=5433 password='it\'s x' user = ab").unwrap();
        assert_eq!(p["password"], "it's x");
        assert_eq!(p["user"], "ab");
        assert_eq!(p["port"], "5433");

        let u = parse_conninfo(
            "postgresql://floe:p%40ss@db.example.com:6543/orders?sslmode=verify-full&sslrootcert=/ca.pem",
        )
        .unwrap();
        assert_eq!(u["user"], "floe");
        assert_eq!(u["password"], "p@ss");
        assert_eq!(u["host"], "db.example.com");
        assert_eq!(u["port"], "6543");
        assert_eq!(u["dbname"], "orders");
        assert_eq!(u["sslmode"], "verify-full");
        let v6 = parse_conninfo("postgres://[::1]:5432,b:5/x").unwrap();
        assert_eq!(v6["host"], "::1,b");
        assert_eq!(v6["port"], "5432,5");
    }

    #[test]
    fn sslmode_rules_follow_libpq() {
        let none = env(&[]);
        let s = ConnSettings::resolve_with("host=h user=u", None, &none, None).unwrap();
        assert_eq!(s.sslmode, SslMode::Prefer);
        assert_eq!(s.verify(), Verify::Nothing);
        let s = ConnSettings::resolve_with("host=h user=u sslrootcert=system", None, &none, None)
            .unwrap();
        assert_eq!(s.sslmode, SslMode::VerifyFull);
        let e = ConnSettings::resolve_with(
            "host=h user=u sslmode=require sslrootcert=system",
            None,
            &none,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("verify-full"), "{e}");
        let e = ConnSettings::resolve_with("host=h user=u sslmode=verify-ca", None, &none, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sslrootcert="), "{e}");
        let s = ConnSettings::resolve_with(
            "host=h user=u sslmode=require sslrootcert=/ca.pem",
            None,
            &none,
            None,
        )
        .unwrap();
        assert_eq!(
            s.verify(),
            Verify::Ca,
            "require with a root cert checks the CA"
        );
        let e = ConnSettings::resolve_with("host=h sslmode=maybe", None, &none, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("maybe"), "{e}");
        let e = ConnSettings::resolve_with("host=h frobnicate=1", None, &none, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("frobnicate"), "{e}");
    }

    #[test]
    fn passwords_from_each_source_in_libpq_order() {
        let dir = tempfile::tempdir().unwrap();
        let pgpass = dir.path().join(".pgpass");
        std::fs::write(
            &pgpass,
            "# comment\nother:*:*:*:nope\ndb:5432:shop:floe:from\\:pgpass\n*:*:*:*:wild\n",
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let home = Some(dir.path());
        let pw = |conninfo: &str, vars: &[(&str, &str)], secret: Option<&SecretLogin>| {
            let s = ConnSettings::resolve_with(conninfo, secret, &env(vars), home).unwrap();
            (
                s.params.get("password").cloned().unwrap_or_default(),
                s.password_source,
            )
        };
        assert_eq!(
            pw("host=db dbname=shop user=floe", &[], None),
            ("from:pgpass".into(), "the passfile")
        );
        assert_eq!(
            pw("host=elsewhere dbname=shop user=floe", &[], None),
            ("wild".into(), "the passfile")
        );
        assert_eq!(
            pw(
                "host=db dbname=shop user=floe",
                &[("PGPASSWORD", "env")],
                None
            ),
            ("env".into(), "PGPASSWORD")
        );
        assert_eq!(
            pw(
                "host=db user=floe password=inline",
                &[("PGPASSWORD", "env")],
                None
            ),
            ("inline".into(), "the conninfo")
        );
        let secret = SecretLogin::from_json(
            r#"{"engine":"postgres","host":"rds.example","port":"5432","username":"rot","password":"s3","dbname":"shop","dbInstanceIdentifier":"x"}"#,
        )
        .unwrap();
        let s = ConnSettings::resolve_with(
            "host=proxy.example password=old sslmode=disable",
            Some(&secret),
            &env(&[]),
            home,
        )
        .unwrap();
        assert_eq!(s.params["password"], "s3");
        assert_eq!(s.params["user"], "rot");
        assert_eq!(
            s.params["host"], "proxy.example",
            "the conninfo's host wins"
        );
        assert_eq!(s.params["dbname"], "shop");
        assert_eq!(s.params["port"], "5432");
        // A world-readable passfile is ignored, as libpq does.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert_eq!(pw("host=db dbname=shop user=floe", &[], None).0, "");
        }
        let bad = SecretLogin::from_json(r#"{"user":"x"}"#)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("username"), "{bad}");
        let numeric =
            SecretLogin::from_json(r#"{"username":"u","password":"p","port":5433}"#).unwrap();
        assert_eq!(numeric.port, Some(5433));
    }
}
