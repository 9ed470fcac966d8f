# enter.pl — runs a command in a template sandbox, whose commands are uid 0 inside: joins the
# sandbox's namespaces and drops the capabilities that joining gave *before* it execs anything of the
# sandbox's. (nsenter would exec with them, and the first thing an exec runs is the dynamic loader,
# which obeys the sandbox's own, writable /etc/ld.so.preload: a library planted there ran with every
# capability and mounted a tmpfs past the disk budget — measured.) This process is a host program,
# loaded before it joins anything. Run as the host uid that owns the sandbox's user namespace; the host
# prepends `my %SYS = (…);`, the raw system call numbers of this machine (launch/perl-helpers.ts).
#
#   PID1 NET KEEP IDS -- CMD...
#
#   PID1  host pid of the sandbox's pid 1 (verified by the caller)
#   NET   1: join its network namespace too; 0: it shares the host's (entering that is refused)
#   KEEP  the bounding set commands keep, as a hex mask (0: none, and uid 0 gains nothing at exec)
#   IDS   UID:GID inside the sandbox that CMD runs as (an image's user: no supplementary groups, and
#         setuid to it clears every capability), or `-`: uid 0 inside
# Inherited descriptors (the environment pipe, cgroup.procs descriptors) pass through to CMD; perl's
# own are close-on-exec. Ends the way CMD ended (its exit status, or the same signal), as nsenter does.
# No `use strict`/`use warnings` and no modules: loading them costs about as much as the rest (measured).

my ($pid1, $net, $keep, $ids, $sep, @cmd) = @ARGV;
die "usage: PID1 0|1 KEEPMASK UID:GID|- -- CMD...\n"
  unless defined $sep && $sep eq '--' && @cmd && $pid1 =~ /^\d+$/ && $keep =~ /^[0-9a-f]+$/ && $ids =~ /^(-|\d+:\d+)$/;
$keep = hex($keep);
my %CLONE = (user => 0x10000000, ipc => 0x08000000, uts => 0x04000000, net => 0x40000000, pid => 0x20000000, mnt => 0x00020000);
my ($PR_CAPBSET_DROP, $PR_SET_NO_NEW_PRIVS, $PR_SET_SECUREBITS) = (24, 38, 28);

# Everything is opened before joining anything: these paths resolve in the host's namespaces.
my @order = ('user', 'ipc', 'uts', ($net ? ('net') : ()), 'pid', 'mnt');
my %fh;
for my $ns (@order) { open($fh{$ns}, '<', "/proc/$pid1/ns/$ns") or die "sandbox-mcp: open ns/$ns: $!\n"; }
opendir(my $root, "/proc/$pid1/root") or die "sandbox-mcp: open root: $!\n";
opendir(my $cwd, "/proc/$pid1/cwd") or die "sandbox-mcp: open cwd: $!\n";
for my $ns (@order) { syscall($SYS{setns}, fileno($fh{$ns}), $CLONE{$ns}) == 0 or die "sandbox-mcp: setns $ns: $!\n"; }
# Joining the mount namespace put us at its root; take pid 1's root and directory (nsenter -r -w).
chdir($root) or die "sandbox-mcp: fchdir root: $!\n";
chroot('.') or die "sandbox-mcp: chroot: $!\n";
chdir($cwd) or chdir('/') or die "sandbox-mcp: chdir: $!\n";

# The drop: the bounding set down to KEEP and no new privileges; with nothing kept, uid 0 gains nothing at exec.
for my $cap (0 .. 63) {
  next if $keep & (1 << $cap);
  last if syscall($SYS{prctl}, $PR_CAPBSET_DROP, $cap, 0, 0, 0) < 0;   # EINVAL past the last capability
}
syscall($SYS{prctl}, $PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 or die "sandbox-mcp: no_new_privs: $!\n";
if ($keep == 0) {   # SECBIT_NOROOT | SECBIT_NOROOT_LOCKED
  syscall($SYS{prctl}, $PR_SET_SECUREBITS, 0x3, 0, 0, 0) == 0 or die "sandbox-mcp: securebits: $!\n";
}

# The pid namespace applies to children: fork, exec there, and end the way the child ended.
my $child = fork() // die "sandbox-mcp: fork: $!\n";
if ($child == 0) {
  # The image's user, in the child only: this process stays root inside, so the command cannot signal it.
  if ($ids ne '-') {
    my ($uid, $gid) = map { $_ + 0 } split(/:/, $ids);
    syscall($SYS{setgroups}, 0, 0) == 0 or do { print STDERR "sandbox-mcp: setgroups: $!\n"; exit 126; };
    syscall($SYS{setresgid}, $gid, $gid, $gid) == 0 or do { print STDERR "sandbox-mcp: setresgid: $!\n"; exit 126; };
    syscall($SYS{setresuid}, $uid, $uid, $uid) == 0 or do { print STDERR "sandbox-mcp: setresuid: $!\n"; exit 126; };
  }
  exec { $cmd[0] } @cmd; print STDERR "sandbox-mcp: cannot run $cmd[0]: $!\n"; exit 127;
}
$SIG{$_} = 'IGNORE' for qw(INT QUIT TERM HUP);
waitpid($child, 0);
my $status = $?;
if ($status & 127) { $SIG{$_} = 'DEFAULT' for qw(INT QUIT TERM HUP); kill($status & 127, $$); exit(128 + ($status & 127)); }
exit($status >> 8);
