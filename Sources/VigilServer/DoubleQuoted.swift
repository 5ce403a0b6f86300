/// Text in double quotes with `"` and `\` escaped and control characters spelled out, as both
/// logfmt (`LogfmtHandler.quoted`) and YAML (`ConfigLoader.quoted`) write it, so a value always
/// stays on one line. The two differ only in how a control character other than newline, return
/// and tab is spelled: `control` gets its code and returns the escape.
func doubleQuoted(_ text: String, control: (UInt32) -> String) -> String {
    var out = "\""
    for s in text.unicodeScalars {
        switch s {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if s.value < 0x20 || s.value == 0x7F {
                out += control(s.value)
            } else {
                out.unicodeScalars.append(s)
            }
        }
    }
    return out + "\""
}
