//! A ureq connector that reaches `mlxr serve --socket PATH` over a Unix
//! domain socket, so that `MLXR_HOST=unix:///run/mlxr.sock mlxr list` works
//! like the TCP address does. Requests still carry `http://localhost/...`
//! URLs; only the connection differs.

use std::fmt;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};
use ureq::Error;

/// Opens a new Unix stream to `path` for every connection ureq asks for.
#[derive(Debug)]
pub struct UnixConnector {
    path: PathBuf,
}

impl UnixConnector {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

impl<In: Transport> Connector<In> for UnixConnector {
    type Out = UnixTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<In>,
    ) -> Result<Option<Self::Out>, Error> {
        let stream = UnixStream::connect(&self.path)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(UnixTransport {
            stream: Arc::new(stream),
            buffers,
        }))
    }
}

pub struct UnixTransport {
    stream: Arc<UnixStream>,
    buffers: LazyBuffers,
}

impl fmt::Debug for UnixTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixTransport").finish()
    }
}

fn io_error(e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            Error::Timeout(ureq::Timeout::Global)
        }
        _ => Error::Io(e),
    }
}

impl Transport for UnixTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let timeout = timeout.for_write();
        self.stream
            .set_write_timeout(timeout.not_zero().map(|t| *t))?;
        let output = &self.buffers.output()[..amount];
        (&*self.stream).write_all(output).map_err(io_error)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        let timeout = timeout.for_read();
        self.stream
            .set_read_timeout(timeout.not_zero().map(|t| *t))?;
        let input = self.buffers.input_append_buf();
        let amount = loop {
            match (&*self.stream).read(input) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                result => break result.map_err(io_error)?,
            }
        };
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // Pooled connections are probed like ureq's TCP transport does: a
        // non-blocking read that would block means the peer is still there.
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut probe = [0u8];
        let open = matches!(
            (&*self.stream).read(&mut probe),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        open && self.stream.set_nonblocking(false).is_ok()
    }
}
