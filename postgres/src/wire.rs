//! A replication session on Postgres's wire protocol.
//!
//! tokio-postgres 0.7 can neither open one (the `replication=database`
//! startup parameter) nor speak the CopyBoth mode `START_REPLICATION`
//! answers with, so this opens the socket, the TLS and the login itself,
//! from the same [`ConnSettings`] as every other session, with
//! postgres-protocol's message builders and SCRAM.

use std::io::{self, Read, Write};
use std::time::Duration;

use bytes::{Buf as _, Bytes, BytesMut};
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::frontend;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

use crate::PgError;
use crate::conn::{ConnSettings, SslMode};

/// The session settings the text of decoded values depends on, as every
/// other floe session sets them (`preflight::connect`): output functions
/// run in the walsender, under its settings.
const SESSION: &[(&str, &str)] = &[
    ("TimeZone", "UTC"),
    ("DateStyle", "ISO, YMD"),
    ("bytea_output", "hex"),
    ("extra_float_digits", "3"),
    ("IntervalStyle", "iso_8601"),
];

/// While streaming, a read that brought less than this waits
/// [`STREAM_PACE`] before the next: the server sends every change as its
/// own message, and a socket the runtime watches woke floe for each one
/// (18,000 wakeups a second, a third more CPU than peeking, at 60,000
/// changes/s). A read that fills this much (a backlog) is followed at once.
const TRICKLE: usize = 128 * 1024;

/// How long a trickling stream gathers before the next read.
const STREAM_PACE: Duration = Duration::from_millis(5);

/// How long a streaming read waits for data before its thread looks at
/// what floe asked of it (a status to report, the end).
const READ_TIMEOUT: Duration = Duration::from_millis(20);

/// A socket, plain or encrypted.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {
    /// The same connection as a blocking socket, whose reads time out
    /// after [`READ_TIMEOUT`].
    fn into_blocking(self: Box<Self>) -> io::Result<Box<dyn Blocking>>;
}

/// A blocking socket, plain or encrypted.
trait Blocking: Read + Write + Send {}
impl<T: Read + Write + Send> Blocking for T {}

impl Io for tokio::net::TcpStream {
    fn into_blocking(self: Box<Self>) -> io::Result<Box<dyn Blocking>> {
        Ok(Box::new(blocking_tcp(*self)?))
    }
}

impl Io for tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    fn into_blocking(self: Box<Self>) -> io::Result<Box<dyn Blocking>> {
        // Records already read and decrypted stay in the connection.
        let (tcp, tls) = self.into_inner();
        Ok(Box::new(rustls::StreamOwned::new(tls, blocking_tcp(tcp)?)))
    }
}

#[cfg(unix)]
impl Io for tokio::net::UnixStream {
    fn into_blocking(self: Box<Self>) -> io::Result<Box<dyn Blocking>> {
        let s = self.into_std()?;
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(READ_TIMEOUT))?;
        Ok(Box::new(s))
    }
}

fn blocking_tcp(tcp: tokio::net::TcpStream) -> io::Result<std::net::TcpStream> {
    let s = tcp.into_std()?;
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    Ok(s)
}

/// One backend message: its tag and body.
pub(crate) struct Frame {
    pub tag: u8,
    pub body: Bytes,
}

/// An open replication session.
pub(crate) struct Wire {
    io: Box<dyn Io>,
    read: BytesMut,
    write: BytesMut,
    host: String,
}

impl Wire {
    /// Connects, encrypts as `sslmode` says and logs in with
    /// `replication=database`.
    pub async fn connect(settings: &ConnSettings) -> Result<Self, PgError> {
        let host = settings.host();
        let timeout = settings
            .param("connect_timeout")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|t| *t > 0)
            .map_or(Duration::from_secs(30), Duration::from_secs);
        let open = async {
            match settings.sslmode {
                SslMode::Disable => Self::open(settings, None).await,
                // As libpq: a server that insists on TLS refuses the plain
                // login, and then the session is asked for again encrypted
                // (whose error, if it fails too, is the one returned).
                SslMode::Allow => match Self::open(settings, None).await {
                    Ok(wire) => Ok(wire),
                    Err(_) => Self::open(settings, Some(true)).await,
                },
                SslMode::Prefer => Self::open(settings, Some(false)).await,
                SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                    Self::open(settings, Some(true)).await
                }
            }
        };
        tokio::time::timeout(timeout, open)
            .await
            .map_err(|_| broken(&host, "connecting", "timed out"))?
    }

    /// A logged-in session: plain with no `tls`, else encrypted if the
    /// server agrees, `Some(true)` refusing a server that does not.
    async fn open(settings: &ConnSettings, tls: Option<bool>) -> Result<Self, PgError> {
        let mut wire = match tls {
            None => Self::plain(settings).await?,
            Some(required) => Self::encrypted(settings, required).await?,
        };
        wire.login(settings).await?;
        Ok(wire)
    }

    /// The first host's socket, unencrypted.
    async fn plain(settings: &ConnSettings) -> Result<Self, PgError> {
        let host = settings.host();
        let io = socket(settings).await?;
        Ok(Self::over(io, host))
    }

    /// The first host's socket, encrypted if the server agrees; `required`
    /// refuses a server that does not.
    async fn encrypted(settings: &ConnSettings, required: bool) -> Result<Self, PgError> {
        let host = settings.host();
        if host.starts_with('/') {
            // A Unix socket never uses TLS, as in libpq.
            return Self::plain(settings).await;
        }
        let mut io = tcp(settings).await?;
        let mut request = BytesMut::new();
        frontend::ssl_request(&mut request);
        io.write_all(&request)
            .await
            .map_err(|e| broken(&host, "asking for TLS", &e.to_string()))?;
        let answer = io
            .read_u8()
            .await
            .map_err(|e| broken(&host, "asking for TLS", &e.to_string()))?;
        match answer {
            b'S' => {
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| broken(&host, "TLS setup", &format!("host name for TLS: {e}")))?;
                let connector = tokio_rustls::TlsConnector::from(settings.tls_config()?);
                let tls = connector
                    .connect(name, io)
                    .await
                    .map_err(|e| broken(&host, "the TLS handshake", &e.to_string()))?;
                Ok(Self::over(Box::new(tls), host))
            }
            b'N' if !required => Ok(Self::over(Box::new(io), host)),
            b'N' => Err(PgError::Stream {
                context: format!("connecting to {host} for replication"),
                message: format!(
                    "the server does not accept TLS, which sslmode={} requires",
                    settings.sslmode.name()
                ),
                code: Some("08004".into()),
            }),
            other => Err(broken(
                &host,
                "asking for TLS",
                &format!("unexpected answer byte {other:#x}"),
            )),
        }
    }

    fn over(io: Box<dyn Io>, host: String) -> Self {
        Self {
            io,
            read: BytesMut::with_capacity(256 * 1024),
            write: BytesMut::with_capacity(1024),
            host,
        }
    }

    /// The startup message and the server's authentication exchange.
    async fn login(&mut self, settings: &ConnSettings) -> Result<(), PgError> {
        let user = settings.param("user").unwrap_or("postgres").to_string();
        let dbname = settings.param("dbname").unwrap_or(&user).to_string();
        let mut params: Vec<(&str, &str)> = vec![
            ("user", user.as_str()),
            ("database", dbname.as_str()),
            ("replication", "database"),
            ("client_encoding", "UTF8"),
        ];
        params.extend_from_slice(SESSION);
        for key in ["application_name", "options"] {
            if let Some(v) = settings.param(key) {
                params.push((key, v));
            }
        }
        frontend::startup_message(params, &mut self.write)
            .map_err(|e| self.io_error("login", &e))?;
        self.flush("login").await?;
        let password = settings.param("password").map(str::to_string);
        let mut scram: Option<ScramSha256> = None;
        loop {
            let frame = self.frame().await?;
            match frame.tag {
                b'R' => {
                    let mut body = frame.body;
                    if body.len() < 4 {
                        return Err(self.protocol("a short authentication message"));
                    }
                    let code = body.get_i32();
                    self.authenticate(code, body, &user, password.as_deref(), &mut scram)
                        .await?;
                }
                b'E' => {
                    return Err(server_error(
                        &format!("logging in to {}", self.host),
                        &frame.body,
                    ));
                }
                b'Z' => return Ok(()),
                // Parameter status, the cancel key, notices.
                _ => {}
            }
        }
    }

    /// Answers one authentication request `code` (`body` after the code).
    async fn authenticate(
        &mut self,
        code: i32,
        body: Bytes,
        user: &str,
        password: Option<&str>,
        scram: &mut Option<ScramSha256>,
    ) -> Result<(), PgError> {
        let host = self.host.clone();
        let needs = || PgError::Stream {
            context: format!("logging in to {host} as {user}"),
            message: "the server asks for a password and none was found (conninfo, \
                      PGPASSWORD, ~/.pgpass or a secret)"
                .into(),
            code: Some("28P01".into()),
        };
        let bad = |e: std::io::Error| broken(&host, "authenticating", &e.to_string());
        match code {
            0 => return Ok(()),
            3 => {
                let pw = password.ok_or_else(needs)?;
                frontend::password_message(pw.as_bytes(), &mut self.write).map_err(bad)?;
            }
            5 => {
                let pw = password.ok_or_else(needs)?;
                let salt: [u8; 4] = body
                    .get(..4)
                    .and_then(|s| s.try_into().ok())
                    .ok_or_else(|| self.protocol("an MD5 request without its salt"))?;
                let hash = postgres_protocol::authentication::md5_hash(
                    user.as_bytes(),
                    pw.as_bytes(),
                    salt,
                );
                frontend::password_message(hash.as_bytes(), &mut self.write).map_err(bad)?;
            }
            10 => {
                let pw = password.ok_or_else(needs)?;
                let offered = body
                    .split(|b| *b == 0)
                    .any(|m| m == SCRAM_SHA_256.as_bytes());
                if !offered {
                    return Err(self.protocol("a SASL login without SCRAM-SHA-256"));
                }
                // Without channel binding, as tokio-postgres' sessions here
                // log in (tls.rs): the server accepts plain SCRAM over TLS.
                let s = ScramSha256::new(pw.as_bytes(), ChannelBinding::unsupported());
                frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut self.write)
                    .map_err(bad)?;
                *scram = Some(s);
            }
            11 => {
                let s = scram
                    .as_mut()
                    .ok_or_else(|| self.protocol("a SASL continuation before its start"))?;
                s.update(&body).map_err(bad)?;
                frontend::sasl_response(s.message(), &mut self.write).map_err(bad)?;
            }
            12 => {
                let s = scram
                    .as_mut()
                    .ok_or_else(|| self.protocol("a SASL end before its start"))?;
                s.finish(&body).map_err(bad)?;
                return Ok(());
            }
            other => {
                return Err(self.protocol(&format!(
                    "authentication method {other}, which floe's replication session does not speak"
                )));
            }
        }
        self.flush("logging in").await
    }

    /// Sends `sql` as a simple query and waits for the server to switch to
    /// CopyBoth mode (`START_REPLICATION`).
    pub async fn start_copy_both(&mut self, sql: &str) -> Result<(), PgError> {
        frontend::query(sql, &mut self.write).map_err(|e| self.io_error("starting", &e))?;
        self.flush("starting replication").await?;
        loop {
            let frame = self.frame().await?;
            match frame.tag {
                b'W' => return Ok(()),
                b'E' => return Err(server_error("starting replication", &frame.body)),
                // Notices.
                _ => {}
            }
        }
    }

    /// The next backend message. Cancel safe: a frame not yet whole stays
    /// in the buffer for the next call.
    async fn frame(&mut self) -> Result<Frame, PgError> {
        loop {
            if let Some(frame) = whole_frame(&mut self.read).map_err(|e| self.protocol(e))? {
                return Ok(frame);
            }
            let n = self
                .io
                .read_buf(&mut self.read)
                .await
                .map_err(|e| self.io_error("reading", &e))?;
            if n == 0 {
                return Err(broken(
                    &self.host,
                    "reading",
                    "the server closed the connection",
                ));
            }
        }
    }

    /// The session, in CopyBoth mode, as a blocking socket for the thread
    /// that streams it.
    pub fn into_blocking(self) -> Result<BlockingWire, PgError> {
        let host = self.host;
        let io = self
            .io
            .into_blocking()
            .map_err(|e| broken(&host, "handing the session to its thread", &e.to_string()))?;
        Ok(BlockingWire {
            io,
            read: self.read,
            scratch: vec![0; 2 * TRICKLE],
            write: self.write,
            host,
            last_read: 0,
        })
    }

    async fn flush(&mut self, what: &str) -> Result<(), PgError> {
        let out = self.write.split();
        self.io
            .write_all(&out)
            .await
            .map_err(|e| self.io_error(what, &e))?;
        self.io.flush().await.map_err(|e| self.io_error(what, &e))
    }

    fn io_error(&self, what: &str, e: &std::io::Error) -> PgError {
        broken(&self.host, what, &e.to_string())
    }

    fn protocol(&self, what: &str) -> PgError {
        protocol_error(&self.host, what)
    }
}

/// A session in CopyBoth mode, read in bulk by its own thread.
pub(crate) struct BlockingWire {
    io: Box<dyn Blocking>,
    read: BytesMut,
    scratch: Vec<u8>,
    write: BytesMut,
    host: String,
    /// Bytes the last read brought.
    last_read: usize,
}

impl BlockingWire {
    /// The next backend message, or `None` when [`READ_TIMEOUT`] passed
    /// without one. A trickle is read every [`STREAM_PACE`], in bulk.
    pub fn frame(&mut self) -> Result<Option<Frame>, PgError> {
        if let Some(frame) = self.whole()? {
            return Ok(Some(frame));
        }
        if self.last_read < TRICKLE {
            std::thread::sleep(STREAM_PACE);
        }
        match self.io.read(&mut self.scratch) {
            Ok(0) => Err(broken(
                &self.host,
                "reading",
                "the server closed the connection",
            )),
            Ok(n) => {
                self.last_read = n;
                self.read.extend_from_slice(&self.scratch[..n]);
                self.whole()
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                self.last_read = 0;
                Ok(None)
            }
            Err(e) => Err(broken(&self.host, "reading", &e.to_string())),
        }
    }

    /// The next backend message if it is already read whole.
    fn whole(&mut self) -> Result<Option<Frame>, PgError> {
        whole_frame(&mut self.read).map_err(|e| protocol_error(&self.host, e))
    }

    /// Sends one CopyData message holding `data`.
    pub fn copy_data(&mut self, data: &[u8]) -> Result<(), PgError> {
        frontend::CopyData::new(data)
            .map_err(|e| broken(&self.host, "writing", &e.to_string()))?
            .write(&mut self.write);
        self.flush()
    }

    /// Ends the copy and the session, as a client that is done would.
    pub fn close(mut self) {
        frontend::copy_done(&mut self.write);
        frontend::terminate(&mut self.write);
        // The server ends the session when the socket closes anyway.
        let _ = self.flush();
    }

    fn flush(&mut self) -> Result<(), PgError> {
        let out = self.write.split();
        self.io
            .write_all(&out)
            .and_then(|()| self.io.flush())
            .map_err(|e| broken(&self.host, "writing a status update", &e.to_string()))
    }
}

/// Splits the first message off `buf` if it is there whole.
fn whole_frame(buf: &mut BytesMut) -> Result<Option<Frame>, &'static str> {
    let Some(head) = buf.get(..5) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let len = usize::try_from(len)
        .ok()
        .filter(|l| *l >= 4)
        .ok_or("a message length below 4")?;
    if buf.len() <= len {
        buf.reserve(len + 1 - buf.len());
        return Ok(None);
    }
    let mut whole = buf.split_to(len + 1);
    let tag = whole[0];
    whole.advance(5);
    Ok(Some(Frame {
        tag,
        body: whole.freeze(),
    }))
}

/// The first host's port.
fn port(settings: &ConnSettings) -> Result<u16, PgError> {
    settings
        .param("port")
        .and_then(|p| p.split(',').next())
        .map_or(Ok(5432), |p| p.trim().parse::<u16>())
        .map_err(|_| broken(&settings.host(), "connecting", "port is not a number"))
}

/// The first host's socket: TCP, or the Unix socket in a directory host.
async fn socket(settings: &ConnSettings) -> Result<Box<dyn Io>, PgError> {
    let host = settings.host();
    #[cfg(unix)]
    if host.starts_with('/') {
        let path = format!("{host}/.s.PGSQL.{}", port(settings)?);
        let s = tokio::net::UnixStream::connect(&path)
            .await
            .map_err(|e| broken(&host, "connecting", &format!("{path}: {e}")))?;
        return Ok(Box::new(s));
    }
    Ok(Box::new(tcp(settings).await?))
}

/// The first host's TCP socket.
async fn tcp(settings: &ConnSettings) -> Result<tokio::net::TcpStream, PgError> {
    let host = settings.host();
    let port = port(settings)?;
    let addr = settings
        .param("hostaddr")
        .and_then(|h| h.split(',').next())
        .unwrap_or(&host)
        .to_string();
    let s = tokio::net::TcpStream::connect((addr.as_str(), port))
        .await
        .map_err(|e| broken(&host, "connecting", &format!("{addr}:{port}: {e}")))?;
    // Status updates are small and must not wait for more to send.
    s.set_nodelay(true)
        .map_err(|e| broken(&host, "connecting", &e.to_string()))?;
    Ok(s)
}

/// The server sent what the protocol does not allow.
fn protocol_error(host: &str, what: &str) -> PgError {
    PgError::Stream {
        context: format!("replication session with {host}"),
        message: format!("protocol violation: {what}"),
        code: Some("08P01".into()),
    }
}

/// A broken connection: worth a retry.
fn broken(host: &str, what: &str, why: &str) -> PgError {
    PgError::Stream {
        context: format!("replication session with {host}, {what}"),
        message: why.to_string(),
        code: None,
    }
}

/// The ErrorResponse `body` as an error of `context`.
pub(crate) fn server_error(context: &str, body: &[u8]) -> PgError {
    let mut code = None;
    let (mut message, mut detail, mut hint) = (String::new(), None, None);
    for field in body.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let text = String::from_utf8_lossy(&field[1..]).into_owned();
        match field[0] {
            b'C' => code = Some(text),
            b'M' => message = text,
            b'D' => detail = Some(text),
            b'H' => hint = Some(text),
            _ => {}
        }
    }
    if let Some(d) = detail {
        message = format!("{message} ({d})");
    }
    if let Some(h) = hint {
        message = format!("{message}; hint: {h}");
    }
    PgError::Stream {
        context: context.to_string(),
        message,
        code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_whole_and_wait_for_the_rest() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[b'd', 0, 0, 0, 7, 1, 2, 3, b'k', 0, 0]);
        let f = whole_frame(&mut buf).unwrap().unwrap();
        assert_eq!((f.tag, &f.body[..]), (b'd', &[1, 2, 3][..]));
        assert!(whole_frame(&mut buf).unwrap().is_none(), "half a header");
        buf.extend_from_slice(&[0, 4]);
        let f = whole_frame(&mut buf).unwrap().unwrap();
        assert_eq!((f.tag, f.body.len()), (b'k', 0));
        assert!(buf.is_empty());
        let mut bad = BytesMut::from(&[b'd', 0, 0, 0, 3][..]);
        assert!(
            whole_frame(&mut bad).is_err(),
            "a length below its own size"
        );
    }

    #[test]
    fn a_server_error_keeps_its_code_detail_and_hint() {
        let body = b"SERROR\0C55006\0Mslot \"s\" is active for PID 7\0DSome detail.\0HA hint.\0\0";
        let PgError::Stream { code, message, .. } = server_error("starting replication", body)
        else {
            panic!("not a stream error");
        };
        assert_eq!(code.as_deref(), Some("55006"));
        assert_eq!(
            message,
            "slot \"s\" is active for PID 7 (Some detail.); hint: A hint."
        );
    }
}
