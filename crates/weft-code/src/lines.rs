//! Newline-delimited messages read from a non-blocking pipe, polling it for a short
//! while before going to sleep.
//!
//! Why spin: waking a sleeping process costs more than a short block takes (on a small
//! VM, by far: docs/performance.md), so a plain pipe round trip costs two wake-ups even
//! when the other side answers at once. Both ends of the sandbox channel therefore poll for a few tens of
//! microseconds (the time a short block takes) before they block; a busy pipeline never
//! sleeps, and an idle one burns at most one window of CPU per message.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How long the engine polls for a worker's answer before it parks the task.
pub(crate) const HOST_SPIN: Duration = Duration::from_micros(60);

/// How long a worker polls for the next request before it sleeps.
pub(crate) const WORKER_SPIN: Duration = Duration::from_micros(200);

/// Largest message either side accepts; a longer line is a protocol error rather than a
/// way to exhaust the reader's memory.
pub(crate) const MAX_LINE: usize = 256 << 20;

/// Room made in the buffer before each read.
const READ_CHUNK: usize = 16 * 1024;

/// Puts `fd` in non-blocking mode.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What one non-blocking read found.
pub(crate) enum Fill {
    /// Some bytes arrived.
    Data,
    /// Nothing yet.
    Empty,
    /// The writer closed the pipe.
    Eof,
}

/// Bytes read so far, split into lines.
#[derive(Default)]
pub(crate) struct LineBuffer {
    buf: Vec<u8>,
    /// How far `buf` has been searched for a newline.
    scanned: usize,
}

impl LineBuffer {
    /// The next complete line (without its newline), if one has arrived.
    pub(crate) fn take_line(&mut self) -> io::Result<Option<String>> {
        match self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                let end = self.scanned + i;
                let rest = self.buf.split_off(end + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.truncate(end);
                self.scanned = 0;
                String::from_utf8(line)
                    .map(Some)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "message not UTF-8"))
            }
            None if self.buf.len() > MAX_LINE => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "message longer than the channel allows",
            )),
            None => {
                self.scanned = self.buf.len();
                Ok(None)
            }
        }
    }

    /// The buffer, with room for one more read at its end (for an async reader's
    /// `read_buf`).
    pub(crate) fn room(&mut self) -> &mut Vec<u8> {
        self.buf.reserve(READ_CHUNK);
        &mut self.buf
    }

    /// Appends bytes read elsewhere.
    #[cfg(test)]
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// One non-blocking read of `fd`, straight into the buffer's spare room (a zeroed
    /// scratch buffer per read cost more than the read itself while polling).
    pub(crate) fn fill(&mut self, fd: RawFd) -> io::Result<Fill> {
        self.buf.reserve(READ_CHUNK);
        loop {
            let spare = self.buf.spare_capacity_mut();
            // SAFETY: `spare` is writable memory of the length passed; read(2) writes at
            // most that many bytes and reports how many it wrote.
            let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), spare.len()) };
            if n > 0 {
                // SAFETY: the first `n` spare bytes were just written by read(2).
                unsafe { self.buf.set_len(self.buf.len() + n as usize) };
                return Ok(Fill::Data);
            }
            if n == 0 {
                return Ok(Fill::Eof);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(Fill::Empty),
                _ => return Err(err),
            }
        }
    }

    /// Polls `fd` until a line arrives or `window` has passed: `Some(line)`, or `None`
    /// when the caller should wait the slow way.
    pub(crate) fn spin_for_line(
        &mut self,
        fd: RawFd,
        window: Duration,
    ) -> io::Result<Option<Option<String>>> {
        let until = Instant::now() + window;
        loop {
            if let Some(line) = self.take_line()? {
                return Ok(Some(Some(line)));
            }
            match self.fill(fd)? {
                Fill::Data => continue,
                Fill::Eof => return Ok(Some(None)),
                Fill::Empty if Instant::now() < until => std::hint::spin_loop(),
                Fill::Empty => return Ok(None),
            }
        }
    }
}

/// Blocks until `fd` is readable (or hung up).
pub(crate) fn wait_readable(fd: RawFd) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: `pfd` is one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_across_pushes() {
        let mut b = LineBuffer::default();
        b.push(b"{\"a\"");
        assert!(b.take_line().unwrap().is_none());
        b.push(b":1}\n{\"b\":2}\npart");
        assert_eq!(b.take_line().unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(b.take_line().unwrap().as_deref(), Some("{\"b\":2}"));
        assert!(b.take_line().unwrap().is_none());
        b.push(b"ial\n");
        assert_eq!(b.take_line().unwrap().as_deref(), Some("partial"));
    }

    #[test]
    fn reads_a_pipe_without_blocking() {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe() writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        set_nonblocking(fds[0]).unwrap();
        let mut b = LineBuffer::default();
        assert!(
            b.spin_for_line(fds[0], Duration::from_micros(10))
                .unwrap()
                .is_none()
        );
        // SAFETY: writing a valid buffer to our own pipe, then closing both ends once.
        unsafe {
            libc::write(fds[1], b"hello\n".as_ptr().cast(), 6);
            libc::close(fds[1]);
        }
        let got = b.spin_for_line(fds[0], Duration::from_millis(10)).unwrap();
        assert_eq!(got, Some(Some("hello".to_owned())));
        let eof = b.spin_for_line(fds[0], Duration::from_millis(10)).unwrap();
        assert_eq!(eof, Some(None));
        // SAFETY: closing the read end we own.
        unsafe { libc::close(fds[0]) };
    }
}
