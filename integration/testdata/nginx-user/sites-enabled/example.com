server {
	listen 127.0.0.1:18080;
	server_name example.com www.example.com *.example.org .example.net "~^(?<sub>.+)\.example\.io$";
	include snippets/locations.conf;
}
