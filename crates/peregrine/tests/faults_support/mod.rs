//! Support for the fault tests: a small filesystem that fills up (a private `tmpfs`).
//!
//! As root (CI) the `tmpfs` is mounted in a temporary directory. As anyone else (or as a root
//! that may not mount) the test re-runs itself inside a user and mount namespace of its own
//! (`unshare -rm`), where it is root and may mount: the test runs either way, never skipped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the environment of a test re-run inside its own namespaces.
const IN_NAMESPACE: &str = "PEREGRINE_TEST_IN_NAMESPACE";

/// A mounted `tmpfs` of a few pages: writes past its size fail with `ENOSPC`.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a `tmpfs` of `bytes` for the test named `test` (its name in the test binary).
    /// `None`: this process could not mount, and the test ran (and passed) in a child process
    /// inside namespaces of its own; return at once.
    pub fn mount(test: &str, bytes: u64) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let mounted = root
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("size={bytes},mode=0755"))
                .arg("tmpfs")
                .arg(dir.path())
                .status()
                .expect("mount(8) runs")
                .success();
        if mounted {
            return Some(SmallDisk { dir });
        }
        // Not root, or root without the right to mount (a container): in namespaces of our own.
        assert!(
            std::env::var_os(IN_NAMESPACE).is_none(),
            "cannot mount a tmpfs on {:?}, even in a user and mount namespace of our own",
            dir.path()
        );
        let status = Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "--"])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", test, "--test-threads=1", "--nocapture"])
            .env(IN_NAMESPACE, "1")
            .status()
            .expect("unshare(1) runs (util-linux)");
        assert!(status.success(), "{test} failed in its own namespaces");
        None
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A path on the disk.
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The names of the files on the disk, sorted.
    pub fn files(&self) -> Vec<String> {
        files_in(self.path())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazy: a server thread may still hold a descriptor on it.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// The names of the files in `dir`, sorted.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
