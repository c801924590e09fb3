// Package mountinfo reads this process's mount table from
// /proc/self/mountinfo: each mount's root, mount point, file system type,
// source and super options, with the kernel's octal escapes undone. The
// cgroup package finds the cgroup hierarchies in it; the homes find the
// file systems mounted on them.
package mountinfo
