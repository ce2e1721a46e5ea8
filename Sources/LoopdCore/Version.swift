/// loopd's version, in one place: `loopd --version` prints it and the startup log line names it.
public enum LoopdVersion {
    /// The version, as `major.minor.patch`.
    public static let string = "0.9.0"
}
