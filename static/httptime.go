package static

import "strconv"

var monthDays = [12]int64{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// ParseHTTPTime reads an HTTP date as nginx's ngx_parse_http_time does, returning
// seconds since 1970 or -1: RFC 1123 ("Tue, 10 Nov 2002 23:50:13"), RFC 850
// ("Tuesday, 10-Dec-02 23:50:13") and asctime ("Tue Dec 10 23:50:13 2002"). Like
// nginx it ignores the weekday, the zone and anything after the time.
func ParseHTTPTime(v []byte) int64 {
	const (
		rfc822 = iota + 1
		rfc850
		isoc
	)
	at := func(i int) byte { // nginx reads a NUL past the end
		if i < len(v) {
			return v[i]
		}
		return 0
	}
	digit := func(i int) bool { c := at(i); return c >= '0' && c <= '9' }
	two := func(i int) int64 { return int64(at(i)-'0')*10 + int64(at(i+1)-'0') }

	fmt := 0
	p := 0
	for ; p < len(v); p++ {
		if v[p] == ',' {
			break
		}
		if v[p] == ' ' {
			fmt = isoc
			break
		}
	}
	for p++; p < len(v); p++ {
		if v[p] != ' ' {
			break
		}
	}
	if len(v)-p < 18 {
		return -1
	}
	var day, year int64
	if fmt != isoc {
		if !digit(p) || !digit(p+1) {
			return -1
		}
		day = two(p)
		p += 2
		switch at(p) {
		case ' ':
			if len(v)-p < 18 {
				return -1
			}
			fmt = rfc822
		case '-':
			fmt = rfc850
		default:
			return -1
		}
		p++
	}
	var month int64
	switch at(p) {
	case 'J':
		switch {
		case at(p+1) == 'a':
			month = 0
		case at(p+2) == 'n':
			month = 5
		default:
			month = 6
		}
	case 'F':
		month = 1
	case 'M':
		if at(p+2) == 'r' {
			month = 2
		} else {
			month = 4
		}
	case 'A':
		if at(p+1) == 'p' {
			month = 3
		} else {
			month = 7
		}
	case 'S':
		month = 8
	case 'O':
		month = 9
	case 'N':
		month = 10
	case 'D':
		month = 11
	default:
		return -1
	}
	p += 3
	if (fmt == rfc822 && at(p) != ' ') || (fmt == rfc850 && at(p) != '-') {
		return -1
	}
	p++
	switch fmt {
	case rfc822:
		if !digit(p) || !digit(p+1) || !digit(p+2) || !digit(p+3) {
			return -1
		}
		year = two(p)*100 + two(p+2)
		p += 4
	case rfc850:
		if !digit(p) || !digit(p+1) {
			return -1
		}
		year = two(p)
		if year < 70 {
			year += 2000
		} else {
			year += 1900
		}
		p += 2
	case isoc:
		if at(p) == ' ' {
			p++
		}
		if !digit(p) {
			return -1
		}
		day = int64(at(p) - '0')
		p++
		if at(p) != ' ' {
			if !digit(p) {
				return -1
			}
			day = day*10 + int64(at(p)-'0')
			p++
		}
		if len(v)-p < 14 {
			return -1
		}
	}
	if at(p) != ' ' {
		return -1
	}
	p++
	if !digit(p) || !digit(p+1) {
		return -1
	}
	hour := two(p)
	p += 2
	if at(p) != ':' {
		return -1
	}
	p++
	if !digit(p) || !digit(p+1) {
		return -1
	}
	min := two(p)
	p += 2
	if at(p) != ':' {
		return -1
	}
	p++
	if !digit(p) || !digit(p+1) {
		return -1
	}
	sec := two(p)
	if fmt == isoc {
		p += 2
		if at(p) != ' ' {
			return -1
		}
		p++
		if !digit(p) || !digit(p+1) || !digit(p+2) || !digit(p+3) {
			return -1
		}
		year = two(p)*100 + two(p+2)
	}
	if hour > 23 || min > 59 || sec > 59 {
		return -1
	}
	if day == 29 && month == 1 {
		if year&3 != 0 || (year%100 == 0 && year%400 != 0) {
			return -1
		}
	} else if day > monthDays[month] {
		return -1
	}
	// Gauss' formula, from March 1, 1 BC, as nginx.
	month--
	if month <= 0 {
		month += 12
		year--
	}
	days := 365*year + year/4 - year/100 + year/400 + 367*month/12 - 30 + day - 1 - 719527 + 31 + 28
	return days*86400 + hour*3600 + min*60 + sec
}

// AppendHTTPTime appends t (seconds since 1970) as an HTTP date, "Mon, 02 Jan 2006
// 15:04:05 GMT", without allocating (and several times faster than time's
// formatting, which is most of a cached response's cost otherwise).
func AppendHTTPTime(dst []byte, t int64) []byte {
	days, secs := t/86400, t%86400
	if secs < 0 {
		days, secs = days-1, secs+86400
	}
	y, m, d := civil(days)
	wd := (days%7 + 11) % 7 // 1970-01-01 was a Thursday
	dst = append(dst, weekdays[wd]...)
	dst = append(dst, ',', ' ', byte('0'+d/10), byte('0'+d%10), ' ')
	dst = append(dst, months[m-1]...)
	dst = append(dst, ' ')
	if y < 0 || y > 9999 {
		dst = strconv.AppendInt(dst, y, 10)
	} else {
		dst = append(dst, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10))
	}
	h, mi, s := secs/3600, secs/60%60, secs%60
	return append(dst, ' ', byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+s/10), byte('0'+s%10), ' ', 'G', 'M', 'T')
}

var weekdays = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// civil turns days since 1970-01-01 into a proleptic Gregorian date (Howard
// Hinnant's days_from_civil, inverted).
func civil(days int64) (y, m, d int64) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}
