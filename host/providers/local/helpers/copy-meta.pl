# copy-meta.pl — what a snapshot's copy of a sandbox's files (templates/layer-copy.ts) cannot do in node:
# extended attributes (overlay's opaque marks, file capabilities) and special files (overlay's whiteouts,
# FIFOs, sockets). Run by the server for one copy; the host prepends `my %SYS = (…);` (launch/perl-helpers.ts).
#
#   O_RDONLY|O_NONBLOCK|O_NOFOLLOW ESTALE      (this machine's values, from node)
#
# Reads requests on stdin, each of fields separated by one NUL and ended by two (no field is empty),
# and answers each with one line: 0, or the errno that stopped it.
#   x SRC DST KIND   copies the extended attributes of SRC to DST. SRC is the sandbox's: a
#                    /proc/<server pid>/fd/<directory>/<name> path, opened without following its last name
#                    and without blocking; it must be KIND (d: a directory, f: a regular file), else
#                    ESTALE (it changed). DST is the server's own copy. Failing to set an attribute is
#                    ignored as cp -a ignores it, but for overlay's own (trusted.overlay.* or user.overlay.*).
#   n DST MODE RDEV  makes the node DST: a character device 0/0 (a whiteout, which needs no privilege),
#                    a FIFO or a socket; anything else is EINVAL.
#   o DST NAME       marks the directory DST opaque for overlay: sets its attribute NAME
#                    (trusted.overlay.opaque or user.overlay.opaque, nothing else: EINVAL) to `y`, without
#                    following DST's last name. An image layer's `.wh..wh..opq` (templates/images/layer-stack.ts).
# No `use strict`/`use warnings` and no modules (see mount-root.pl).

my ($open_flags, $ESTALE) = map { 0 + $_ } @ARGV;
my ($AT_FDCWD, $S_IFMT, $S_IFCHR, $S_IFIFO, $S_IFSOCK, $EINVAL) = (-100, 0170000, 0020000, 0010000, 0140000, 22);
my $MAX = 65536;   # XATTR_LIST_MAX and XATTR_SIZE_MAX
$| = 1;
$/ = "\0\0";

sub copy_xattrs {
  my ($src, $dst, $kind) = @_;
  sysopen(my $fh, $src, $open_flags) or return 0 + $!;
  return $ESTALE unless ($kind eq 'd' ? -d $fh : -f $fh);
  my $fd = fileno($fh);
  my $list = "\0" x $MAX;
  my $n = syscall($SYS{flistxattr}, $fd, $list, $MAX);
  return 0 if $n <= 0;   # none, or a file system without them
  my $dst_c = "$dst\0";
  for my $name (split /\0/, substr($list, 0, $n)) {
    my $name_c = "$name\0";
    my $value = "\0" x $MAX;
    my $len = syscall($SYS{fgetxattr}, $fd, $name_c, $value, $MAX);
    next if $len < 0;   # removed meanwhile
    my $r = syscall($SYS{lsetxattr}, $dst_c, $name_c, $value, $len, 0);
    return 0 + $! if $r < 0 && $name =~ /^(trusted|user)\.overlay\./;
  }
  return 0;
}

sub make_node {
  my ($dst, $mode, $rdev) = (@_[0], 0 + $_[1], 0 + $_[2]);
  my $type = $mode & $S_IFMT;
  return $EINVAL unless ($type == $S_IFCHR && $rdev == 0) || $type == $S_IFIFO || $type == $S_IFSOCK;
  my $dst_c = "$dst\0";
  return syscall($SYS{mknodat}, $AT_FDCWD, $dst_c, $mode, 0) < 0 ? 0 + $! : 0;
}

sub mark_opaque {
  my ($dst, $name) = @_;
  return $EINVAL unless $name =~ /^(trusted|user)\.overlay\.opaque$/;
  my ($dst_c, $name_c, $value) = ("$dst\0", "$name\0", 'y');
  return syscall($SYS{lsetxattr}, $dst_c, $name_c, $value, 1, 0) < 0 ? 0 + $! : 0;
}

while (defined(my $req = <STDIN>)) {
  chomp $req;   # $/ is the two NULs
  my ($op, @args) = split /\0/, $req;
  my $r = $op eq 'x' && @args == 3 ? copy_xattrs(@args)
        : $op eq 'n' && @args == 3 ? make_node(@args)
        : $op eq 'o' && @args == 2 ? mark_opaque(@args)
        : $EINVAL;
  print "$r\n";
}
